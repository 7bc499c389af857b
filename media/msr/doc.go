// Package msr makes the box a distributed media server (MSR) of the HQ
// softswitch, as docs/design.md §1 "Per-interface MSR UA registration" asks:
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
// rejected password) is retried at RetryInterval, which docs/design.md §1
// makes long on purpose. Expires asks for twice RegisterInterval.
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
// fuzzed); SYNC and K-ALIVE are answered 200; a channel silent for its
// keep-alive interval, or with broken framing, is closed. The first
// request must be SYNC: anything else before it is 406 (RFC 6230 §8,
// "message out of sequence"; §6: SYNC before any other signalling).
//
// How the channel is set up. RFC 6230 §5 sets it up with an INVITE whose
// offer names it (COMEDIA, RFC 4145):
//
//	m=application 9 TCP cfw
//	a=setup:active
//	a=connection:new
//	a=cfw-id:H839quwhjdhegvdga
//
// An INVITE to any MSR UA with such an offer (and no other m-line) opens
// a control dialog: the 200 answers m=application CONTROL-PORT TCP cfw,
// c= the service address, a=setup:passive, a=connection:new and the same
// cfw-id (488 for TLS, a=setup:passive in the offer — this side only
// listens —, audio in the same offer, a missing cfw-id or one already in
// use, or no listener; 403 from a source the control listener would
// refuse, 486 beyond 16 control dialogs). The same offer again (a re-INVITE) gets the same
// answer, another one 488; BYE ends the dialog and closes the channels
// bound to it. ECSS-10 does not do this: it connects to the
// P-Eltex-MSR-CC-Addr/Port of the service UA's REGISTER directly.
//
// Decision on SYNC's Dialog-ID (RFC 6230 §6: the cfw-id of the dialog
// that set the channel up; §8: 481 when that dialog does not exist): a
// Dialog-ID naming a live control dialog binds the channel to it
// (ChannelStatus.Bound; closed with the dialog). One naming none is 481
// when Config.ControlDialogRequired is set (strict RFC 6230) and, by
// default, accepted as a direct channel, because that is what ECSS-10
// needs and the source is already restricted to the servers' addresses
// (below); such a channel lives until it is closed or silent.
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
// asked packages are in force (422 when none). CONTROL (406 before SYNC,
// 400 without Control-Package or with a Content-Type other than
// application/msc-mixer+xml, 420 with Supported for any package but
// msc-mixer/1.0 or one not asked for in SYNC) is answered 200 with the
// RFC 6505 package response, parsed with encoding/xml (fuzzed):
//
//   - join id1 id2 [stream media="audio" direction]: bridges the two
//     connections (any interfaces; µ-law/A-law transcoded); direction is
//     seen from id1 (sendonly = id1 → id2). 408 already joined to each
//     other, 411 one of them joined elsewhere (no mixing of more than
//     two), 412 unknown connection, 406 an id without ':' (a conference),
//     407 a connection joined to itself or more than one stream.
//   - modifyjoin: changes the direction (409 not joined).
//   - unjoin: stops both ways (409 not joined).
//   - audit: auditresponse with <capabilities/> and the joins as
//     <joinaudit> (mixerid: 406).
//   - 400 bad XML, namespace, version or attribute; 422 other elements
//     and non-audio streams.
//
// Decision on 202 and REPORT (RFC 6230 §7.1: 202 when the answer cannot
// be given within the transaction timeout, the outcome following in
// REPORT update/terminate): nothing here completes later. A join,
// modifyjoin or unjoin only re-points the relay endpoints' forwarding,
// audit reads a map, and a connection a request can name already exists
// (its id is the to-tag, which the softswitch learns from the 200 sent
// after the connection is registered). So every CONTROL is answered
// 200 at once, no REPORT is ever sent, and there is no pending
// transaction (nor 423 for a duplicate one). A CONTROL received whole is
// carried out even if the channel drops before its answer is written:
// joins belong to the connections, not to the channel — a softswitch that
// reconnects finds them in audit, BYE frees them; one cut short does
// nothing.
//
// RFC 6230 / RFC 6505 elements supported:
//
//   - framework: the COMEDIA control dialog (m=application TCP cfw,
//     a=setup, a=connection, a=cfw-id) and direct channels; SYNC
//     (Dialog-ID, Keep-Alive, Packages; answers Keep-Alive, Packages,
//     Supported), K-ALIVE, CONTROL; codes 200, 400, 405, 406, 420, 422,
//     481; keep-alive timeout.
//   - msc-mixer/1.0: join, modifyjoin, unjoin (between two connections),
//     <stream media="audio" direction>, audit (capabilities, mixers:
//     joinaudit); <response> / <auditresponse> with codes 200, 400, 406,
//     407, 408, 409, 411, 412, 419, 422.
//
// Not supported:
//
//   - framework: TLS (TCP/TLS cfw, a=fingerprint), 202 and REPORT
//     (nothing completes later), K-ALIVE sent by this side (the
//     softswitch is the active side), Transaction-Timeout
//     negotiation, 423 (no pending transactions), this side connecting
//     out (a=setup:passive offers).
//   - msc-mixer/1.0: conferences (createconference, modifyconference,
//     destroyconference, mixerid in audit), mixing of more than two
//     connections, <event> notifications and <subscribe>, per-stream
//     unjoin, <volume>, <clamp>, <region>, <priority>, video, the
//     msc-ivr/1.0 package.
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
// # Tests
//
// Besides loopback tests, TestNamespaceSoftswitchJoins runs the MSR the
// way the softswitch uses it on a real kernel: SIPp (testdata/sipp) sets
// up the control dialog and one media connection on each of two
// "VLAN" interfaces (veths into their own namespaces: the test kernel
// has no 802.1Q), a control client written in the test joins them, RTP
// (pion/rtp) crosses both ways, modifyjoin and unjoin stop it, BYE frees
// the ports, and 200 INVITE/BYE leave none.
//
// # What it does not do
//
// No SIP over TCP/TLS to the servers (UDP only); no RFC 3263 SRV/NAPTR
// lookup of the servers (A/AAAA through the Resolver); media only through
// the Media the appliance passes; it never changes the kernel's
// configuration. It imports netcfg and media/selection only (tests also
// media/relay, media/sdprewrite and netcfg/netnstest).
package msr
