// Package mscclient is the client side of an RFC 6230 media control
// channel: what this box uses to drive another box's MSR (media/msr is the
// server side) when a call's media is anchored there (docs/design.md §1 "Media
// resource selection").
//
// Dial opens the TCP channel to the address the MSR announced in its
// REGISTER ({prefix}CC-Addr and {prefix}CC-Port), sends SYNC (Dialog-ID,
// Keep-Alive, Packages: msc-mixer/1.0) and waits for its 200; the Conn
// then sends K-ALIVE at a third of the Keep-Alive the server granted, so
// the server (which closes a channel silent for that long) keeps it.
// Join and Unjoin send CONTROL with Control-Package: msc-mixer/1.0 and an
// RFC 6505 <mscmixer> body, and read the package's <response status=…>:
// anything but 200 is a *MixerError with that status (412 unknown
// connection, 408 already joined…), a CFW status other than 200 a
// *StatusError. Frames are read and written with media/msr's framing
// (msr.ReadFrame, fuzzed there); the package response is parsed here with
// encoding/xml (ParseResponse, fuzzed).
//
// Decisions:
//   - Dialog-ID: this box sets up the connections with its own INVITEs,
//     so no SIP dialog created the channel (RFC 6230 §5 COMEDIA); the
//     Dialog-ID is a random token unless Config.DialogID says otherwise:
//     a direct channel, as ECSS-10 opens them. An MSR that insists on a
//     control dialog set up by INVITE answers SYNC 481; Dial fails, and
//     the caller (the appliance) anchors the call on its own relay.
//   - One channel per MSR, shared by every call anchored there (Pool);
//     requests on it are matched to responses by transaction id, so calls
//     do not wait for each other. A channel that fails (read error,
//     keep-alive unanswered, closed by the server) is closed and removed
//     from the Pool; the next Get dials again.
//   - K-ALIVE and REPORT from the server are answered 200; any other
//     request 405 (RFC 6230 §9.2: the server sends REPORT and K-ALIVE
//     only).
//
// Not done: REPORT/202 (extended transactions: every CONTROL this client
// sends is answered at once by media/msr), modifyjoin, audit, conferences,
// msc-ivr, TLS on the channel.
package mscclient
