// Package msr makes the box a distributed media server (MSR) of the HQ
// softswitch, as DESIGN.md §1 "Per-interface MSR UA registration" asks:
// one SIP UA per announced interface, registered at every address of
// every configured server, kept in step with the network, plus the
// RFC 6230 control-channel listener the softswitch connects to.
//
// # What is registered
//
// An interface is announced when it is administratively up with carrier,
// not loopback, has a media address (its first IPv4 address, else its
// first global IPv6 one) and matches Config.Interfaces (path.Match
// globs). VLAN sub-interfaces, macvlans and veths are ordinary links.
// Decision: the service interface is always announced when usable,
// whatever the globs say, because its UA carries the control-channel
// fields the softswitch needs.
//
// Every REGISTER leaves from one UDP socket bound to the service
// interface's address (a sipgo client pinned to that socket; LIBRARIES.md
// on Laddr). For interface lan0 with address 198.18.1.1, MSR name
// msr-kazan and contact id 1 it says:
//
//	REGISTER sip:msr-kazan SIP/2.0
//	From: "lan0(198.18.1.1)" <sip:lan0;1@msr-kazan>;tag=…
//	To: "lan0(198.18.1.1)" <sip:lan0;1@msr-kazan>
//	Contact: "lan0(198.18.1.1)" <sip:lan0;1@SERVICE-IP:PORT>
//	Expires: 600
//	P-Eltex-MSR-Iface-Name: lan0
//	P-Eltex-MSR-Iface-Addr: 198.18.1.1
//	P-Eltex-MSR-Acc-Id: 1
//	P-Eltex-MSR-Name: msr-kazan
//	P-Eltex-MSR-Load: 37
//
// and, on the service UA only, P-Eltex-MSR-CC-Addr and P-Eltex-MSR-CC-Port
// (the control listener). The prefix is Config.HeaderPrefix. The URI is
// {interface-name};{msr-contact-id}@{msr-name}; the announced form
// interface-name(MEDIA-IP) is the display name. {prefix}Load is the
// box's load since the previous REGISTER pass, read by media/selection on
// the receiving side: the CPU (/proc/stat deltas) or, with NewLoad (the
// appliance's choice), the larger of that and the relay's RTP packets/s
// against a capacity (msr.capacity_pps, default DefaultCapacityPPS); {prefix}Zone and {prefix}Site
// are added when configured. The Request-URI is the MSR name's domain
// (RFC 3261 §10.2: the domain of the AOR); the destination is each
// resolved server address. Digest challenges (401/407) are answered once
// with Config.Username/Password.
//
// # Timing
//
// A UA is registered at once when it appears; refreshed every
// RegisterInterval (sooner if the registrar grants a shorter expiry);
// an unconfirmed one (no answer within Timeout, an error response, a
// rejected password) is retried at RetryInterval, which DESIGN.md makes
// long on purpose. Expires asks for twice RegisterInterval.
//
// # Following the network
//
// The Agent is driven by netcfg event batches (a Watcher subscription),
// not by polling. It rebuilds the link/address picture from the batches,
// and after a cool-down (Config.Debounce, so a burst costs one pass and
// the final state wins) compares the wanted registrations with the
// running ones: a new interface is registered, a vanished, down or
// address-less one unREGISTERed (Expires: 0), one whose address changed
// re-registered with the new address. A new address of the service
// interface rebinds the SIP socket and the control listener (new before
// old is closed) and every UA re-registers from it, after an unREGISTER
// of its old contact. When the service interface is unusable nothing can
// be sent: registrations are forgotten without unREGISTER (they lapse).
// Each registration (UA × server address) is one goroutine with its own
// Call-ID and CSeq; a new wish interrupts a REGISTER in flight. Names are
// resolved again every RegisterInterval; the last good answer is kept
// when DNS fails.
//
// # Control channel (RFC 6230)
//
// A TCP listener on the service address (Config.ControlPort, default
// 5700) accepts the softswitch's control connection: frames
// "CFW <trans-id> <method>" + headers + Content-Length body (ReadFrame,
// fuzzed); SYNC (needs Dialog-ID) and K-ALIVE are answered 200; a channel
// silent for its keep-alive interval, or with broken framing, is closed.
//
// # Media (WithMedia)
//
// The SIP socket also serves INVITE, ACK, BYE (and CANCEL: 481, INVITEs
// are answered at once). An INVITE whose Request-URI user is
// {iface};{contact-id} of an announced interface opens a media connection:
// Media.Open binds RTP/RTCP on that interface's address and answers the
// offer (the appliance passes media/relay's Endpoint: media.codecs
// intersected, 488 when nothing matches, plain RTP only); 404 for an
// unknown UA, 488 for an INVITE without an offer (late offer unsupported).
// A re-INVITE updates the remote side (481 for an unknown dialog); BYE,
// and the media's inactivity callback (the MSR then sends its own BYE),
// close it and free the ports. The connection id is the dialog's
// local-tag:remote-tag (RFC 6230), the tags accepted in either order.
// No 2xx retransmission beyond sipgo's, no PRACK, UPDATE or Session-Timer.
//
// SYNC answers Supported: msc-mixer/1.0 and, in Packages, which of the
// asked packages are in force (422 when none). CONTROL (403 before SYNC,
// 400 without Control-Package, 420 with Supported for any package but
// msc-mixer/1.0 or one not asked for in SYNC) is answered 200 with the
// RFC 6505 package response, parsed with encoding/xml (fuzzed):
//
//   - join id1 id2 [stream media="audio" direction]: bridges the two
//     connections (any interfaces; µ-law/A-law transcoded); direction is
//     seen from id1 (sendonly = id1 → id2). 408 already joined to each
//     other, 411 one of them joined elsewhere (no mixing of more than
//     two), 412 unknown connection, 406 an id without ':' (a conference).
//   - modifyjoin: changes the direction (409 not joined).
//   - unjoin: stops both ways (409 not joined).
//   - audit: auditresponse with <capabilities/> and the joins as
//     <joinaudit> (mixerid: 406).
//   - 400 bad XML, namespace, version or attribute; 422 other elements
//     and non-audio streams.
//
// Not supported: conferences (createconference, modifyconference,
// destroyconference), REPORT and 202 (every answer is final), <event>
// notifications and subscriptions, per-stream unjoin, video, msc-ivr.
//
// The channel is the softswitch's alone. A connection is accepted only
// from an address the servers currently resolve to (the last good answer
// while DNS fails) or from Config.ControlAllow; any other is closed
// before anything is read, counted in ControlStatus.Refused and logged at
// most once a minute per source. The resolving loop publishes the allowed
// set through an atomic pointer, so accepting never waits on it. An
// allowed source gets at most 4 connections (16 in all); a connection
// that has not completed SYNC within Config.ControlSyncTimeout (5 s) is
// closed, whatever else it sends; the Keep-Alive a SYNC asks for is held
// to 5–600 s and the 200 says the value in force. Channels already open
// stay when the allowed set changes.
//
// # What it does not do
//
// No SIP over TCP/TLS to the servers (UDP only); no RFC 3263 SRV/NAPTR
// lookup of the servers (A/AAAA through the Resolver); media only through
// the Media the appliance passes; it never changes the kernel's
// configuration. It imports netcfg and media/selection only (tests also
// media/relay and media/sdprewrite).
package msr
