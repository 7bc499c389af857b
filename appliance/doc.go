// Package appliance is the composition root of outpostd: it opens the
// store, chooses the document to run (the stored active version, a file
// given with --config, or the embedded default), translates it into each
// part's Config, owns every goroutine, serves the admin API, and applies
// pushed documents live with rollback.
//
// Apply order: validate the whole document (nothing changes if anything is
// wrong) → reconfigure the parts → commit the new version in one SQLite
// transaction. If the commit fails the parts are reconfigured back to the
// running document, so the box never runs a version it has not stored.
package appliance
