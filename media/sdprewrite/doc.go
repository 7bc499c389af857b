// Package sdprewrite reads the audio part of an SDP offer or answer and
// writes the SDP that the media relay sends on the other leg: the box's
// address and ports, a chosen codec list with payload types, and the
// direction attribute, leaving every other line as the sender wrote it.
//
// It is the code base's one SDP reader: the B2BUA (gateway/b2bua, allowed
// to import this pure leaf for that reason) reads origins and directions
// with ParseAny and makes its two small edits, WithOrigin and
// WithSendRecv, here too.
//
// Design decisions:
//
//   - Parsing is line based and tolerant (RFC 4566 grammar, loosely): real
//     phones send SDP with LF instead of CRLF, no final newline, c= after
//     t=, no t= at all, lower-case encoding names, static payload types
//     without a=rtpmap, m= ports with a port count ("49170/2") and c= with
//     a TTL. pion/sdp rejects several of these, so it is not used to parse
//     what comes from the network; the tests and the fuzz target use it as
//     an oracle on input it accepts (both parsers must then agree) and to
//     check that the SDP written for well-formed input stays well-formed.
//   - Every m= section is read into Sections (kind, transport, formats,
//     address, direction, keys, a=mid); the first audio one is also Audio,
//     the stream whose codecs the relay chooses. Other sections the box
//     relays (Params.Streams: RTP audio, video and text, Section.Relayable)
//     keep their formats, a=rtpmap, a=fmtp, a=rtcp-fb and a=extmap as the
//     sender wrote them and get the box's port, transport, direction and
//     keys. Every other section (not relayable, or one the caller does not
//     relay) keeps its lines but gets port 0, which RFC 3264 §6 and §8.2
//     use to reject or disable a stream. a=group (BUNDLE) is removed, so
//     a bundled offer is answered unbundled, one port per stream (RFC
//     8843 §7.3.3); a=mid stays.
//   - Rewrite keeps the order of the lines it does not own and regenerates
//     the ones it does: o=, every c= (the box's address), the audio m=,
//     its a=rtpmap/a=fmtp lines (from the codec list), its direction
//     attribute (always written, at media level; session-level direction
//     lines are dropped so the two cannot disagree), and a=rtcp (the RTP
//     port + 1, only when the sender used a=rtcp). Lines that describe the
//     sender's transport and would be wrong once the box is in the path —
//     ICE candidates and credentials, a=rtcp-mux, a=ssrc, a=msid, and in
//     the audio section a=rtcp-fb (its payload types are the box's) — are
//     removed. The written SDP always uses CRLF and ends with one.
//   - SDES (RFC 4568): a=crypto lines of each section are read into
//     Media.Crypto when the box can key them (the suites of Suites, one
//     inline key, optional lifetime; no MKI, no several keys, no session
//     parameters: such lines are counted in Media.CryptoLines and
//     otherwise ignored). Keys are per hop, so Rewrite always removes the
//     sender's a=crypto lines and writes Params.Crypto (Stream.Crypto), with
//     the m= line's profile from Params.Proto (Stream.Proto). Crypto's String and
//     LogValue redact the key; only Line, used for SDP bodies, writes it.
//   - c=IN IP4 0.0.0.0 (RFC 2543 hold) is reported as such (Media.Hold);
//     the relay turns it into a direction.
//   - The o= line is the caller's: RFC 3264 §8 wants the same session id
//     and a version that grows by one with each change on a leg, and only
//     the relay knows what it sent before. Origin is read only from a
//     complete session-level o= line (six fields, a numeric version; the
//     first one when there are several) and is zero otherwise, so a
//     caller continuing an origin never builds on a guess.
//   - Directions follow RFC 3264 §5.1 and RFC 4566 §6: the audio
//     section's own attribute, else the session-level one, else sendrecv;
//     attributes of other m= sections do not apply to audio.
//   - Parse wants an audio stream (the relay has nothing to do without
//     one); ParseAny reads any description, for code that only needs the
//     session level. WithOrigin and WithSendRecv change only their lines
//     and, like Rewrite, write CRLF; a description they do not change is
//     returned byte for byte.
//
// The package knows nothing of ports, sockets or policies, and imports
// nothing of this module.
package sdprewrite
