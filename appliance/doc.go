// Package appliance is the composition root of outpostd: it opens the
// store, chooses the document to run (the stored active version, a file
// given with --config, the --factory document or the embedded default),
// translates it into each part's Config, owns every goroutine, serves the
// admin API, and applies pushed documents live.
//
// # Files
//
//	appliance.go   App, New (build every part, bind its sockets), Run (start, drain, stop in order)
//	apply.go       the document to start on; Apply and Rollback
//	parts.go       the part interface: prepare, then commit or abort
//	part_*.go      the parts: gateway (SIP), media (RTP relay), msr, mgmt (HTTPS API), status (page), mode
//	translate.go   the only translation from the stored document to each part's Config
//	httpslot.go    the one HTTP server of the management and status parts, swapped on a push
//	drain.go       refusing new calls while calls in progress finish (stop, reboot, outpostctl drain)
//	boxcert.go     the box's own SIP TLS certificate, made at first boot when the document has none
//	backend.go     the API's reads (status, registrations, calls, config, route); interfaces.go, cdr.go, metrics*.go, trace.go
//	localchoice.go which of the box's addresses faces a peer when several could (media resource selection)
//	remotemedia.go where a call's media is anchored: the local relay or another box's MSR registered here (media resource selection)
//
// # Applying a document
//
// Validation is whole: anything wrong refuses the document with every field
// error and nothing changes. A valid document is translated once into every
// part's Config, then applied in two phases. Each part prepares — does all
// its fallible work (binding new sockets, parsing certificates, building an
// HQ trunk, checking against the network) without changing what runs; if
// any part refuses, the parts prepared so far are aborted (new sockets
// closed) and the refusal names the part. When all have prepared, the
// version is stored in one SQLite transaction; if that fails, every part is
// aborted. Then every part commits, which cannot fail. So the box runs the
// new document entirely or the old one entirely, and never a version it
// has not stored. (The MSR agent binds its UA sockets on its own goroutine
// when it takes a configuration; should that fail after prepare, it keeps
// its previous configuration and says so in the log and in interfaces.)
//
// # Locks
//
// The running document and version are an immutable snapshot (running) in
// an atomic pointer: calls, probes, netlink handlers and the API read it
// without a lock. applyMu serialises only the writers: Apply, Rollback and
// the rebinding of listeners that follow interface addresses, which runs on
// its own goroutine so that a netlink event never waits for a push.
//
// # Stopping
//
// Run stops the parts in a fixed order, each after the one before has
// returned: the admin socket, the management API and the status page (no
// pushes while stopping), the gateway (SIP stops; the drain of calls in progress
// belongs here), msr (the MSR UAs unREGISTER), the media relay, the
// netlink watcher and the mode machine, and last the CDR writer, so every
// ended call's record is written before the store closes.
package appliance
