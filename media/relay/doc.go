// Package relay is the RTP media relay of outpostd: it anchors a call's
// audio (and video) on the box, between leg A (usually the caller) and leg B, so that
// calls between VLANs, to the PSTN gateway, or between a µ-law phone and
// an A-law gateway work (docs/design.md §1).
//
// The B2BUA drives a Session with the SDP of the call: Offer(from, sdp)
// for each offer (INVITE, re-INVITE) returns the SDP to send to the other
// leg; Answer(from, sdp) for each answer (183, 200) returns the SDP for
// the offerer; Close at the end. The gateway may not import this package
// (docs/design.md §2): it declares the interface it needs (b2bua.Anchor, with its
// own Leg type), and the appliance adapts a Session to it, converting
// legs with relay.Leg(from) (Leg is an alias of int). The B2BUA answers
// any Anchor error with 488; ErrNotAcceptable also carries SIPStatus()
// 488 for code that finds the status with errors.As. Release (Close
// without the figures) is for an interface that cannot name LegStats.
//
// # Design decisions
//
//   - Ports: each leg gets an RTP/RTCP pair (even RTP port, RTCP = +1,
//     RFC 3550 §11) on the box's address facing that leg, bound when the
//     first SDP sent to that leg needs it. Next-fit allocation over the
//     configured range delays reuse of a just-released pair; pairs taken
//     by other processes are skipped. Every path that ends a session
//     (Close, Run's shutdown) releases both pairs; PortsInUse counts them.
//   - Codecs: the offer to the other leg carries the allowed codecs
//     (Config.Codecs, in that preference order) that the offerer offered;
//     when it offered only one G.711 law and both are allowed, the other
//     law is added, so a µ-law phone can reach an A-law-only gateway. The
//     answer settles each leg's codec; when they differ the payload is
//     converted per packet in place with media/g711 (sample by sample, so
//     any ptime works) and the payload type rewritten. telephone-event
//     (RFC 4733) passes with its payload type mapped between the legs;
//     once used on a leg its number is kept in later offers (RFC 3264
//     §8.3.2). Nothing else is transcoded: no common codec is
//     ErrNotAcceptable (488).
//   - Streams besides the audio (streams.go): every other RTP audio,
//     video or text m= section of an offer (sdprewrite.Section.Relayable),
//     up to MaxStreams, is anchored on a port pair of its own per leg and
//     offered to the other leg with the offerer's formats unchanged, so
//     both legs use the same payload types and packets pass byte for byte
//     (no transcoding, no SSRC rewrite: video carries retransmission and
//     simulcast SSRCs). Latching, directions, RTCP, statistics
//     (Session.Streams) and SRTP per leg (keys of its own per stream) work
//     as for the audio, but a stream that fails them (no usable a=crypto
//     where the policy needs one, a port 0 answer, too many streams) is
//     rejected with port 0 on both legs instead of failing the call. Other
//     sections (T.38, DTLS, data channels) are rejected with port 0, and
//     BUNDLE offers are answered unbundled (sdprewrite). Music on hold and
//     the inactivity timer follow the audio stream only.
//   - Directions: media from a leg is relayed only when that leg's SDP
//     lets it send and the other leg's SDP lets it receive, so sendonly,
//     recvonly, inactive and c=0.0.0.0 (RFC 2543) hold stop exactly the
//     directions they name, and a later sendrecv resumes them. RTCP keeps
//     flowing on hold. A c=0.0.0.0 hold keeps the leg's last signalled
//     address for latching, so the holder's music on hold is taken.
//   - Music on hold (moh.go): with Config.MusicOnHold, a leg that holds
//     by a re-offer (sendonly, inactive, c=0.0.0.0) stops being relayed
//     and the held leg hears the box's recording instead, in its law,
//     SSRC and SRTP key; an inactive hold is offered on as sendonly and
//     answered inactive. Resume stops it; a call's first offer is never
//     a hold. The box answers an offer with the answerer's direction
//     within what the offer allows (RFC 3264 §6.1).
//   - Symmetric RTP (RFC 4961) with latching limited by policy:
//     LatchSignalled accepts only the signalled address and port;
//     LatchFirstPackets follows the source of the first N packets (or
//     locks at once on the signalled one) and then locks. After that a
//     stranger's packets are refused and counted, never relayed and never
//     able to redirect the stream. A new SDP from the leg restarts it.
//   - Continuity: the stream sent to a leg keeps one SSRC with increasing
//     sequence numbers and timestamps when the source changes SSRC (a
//     re-INVITE to another device, another fork's early media): the new
//     source is offset to continue the old one, with the marker bit set.
//     While the SSRC does not change nothing is rewritten. RTCP SR/RR
//     sender SSRCs (and SR timestamps) follow the same mapping.
//   - Hot path: on Linux a session's sockets are served by one of the
//     relay's pollers (poll_linux.go; a session's four sockets on one): an
//     epoll instance of the poller's own holds the sockets' raw
//     descriptors, which Go's netpoller never sees, and one goroutine waits
//     for that instance to be readable (with one P, through Go's
//     netpoller; with more, half as many pollers as Ps each wait in
//     epoll_wait on a P they keep, which cost a sixth less CPU per packet
//     at 10 kpps), then serves the ready sockets (recvmmsg of up to 8
//     datagrams, forward, sendmmsg, all raw system calls; 3 system calls
//     of its own for a lone datagram). Before, one goroutine per socket
//     parked on the netpoller: each packet cost a goroutine wake-up, a
//     scheduler round trip and a second recvmmsg that found the socket
//     empty; now one wake-up serves whatever arrived meanwhile, and the
//     read buffers are the poller's, not 2 KiB per socket
//     (bench/RESULTS.md, issue 16 item 5).
//   - Pacing: a busy poller (a wake-up that served datagrams within 2 ms
//     of the previous one) sleeps 1 ms between wake-ups, with its sockets
//     unable to wake the process meanwhile, and serves everything that
//     came in that time at once, until a wake-up finds nothing; then it
//     waits for the next datagram again. The process's wake-ups (a
//     context switch and a pass of the scheduler each, a third of an
//     anchored call's CPU at 12 kpps when taken once per datagram) are
//     then at most 1,000 a second per poller, for at most about 1 ms of
//     added delay, and only while datagrams come less than 2 ms apart: a
//     lone call's two 50 pps streams are relayed as they come (interrupt
//     mitigation, as NICs do; bench/RESULTS.md, issue 16 item 1). The
//     poller's goroutine ends when its last socket is removed
//     (Session.Close returns only once the poller no longer uses the
//     session's sockets) and starts again with the next. Config.Batch > 1 keeps the goroutine-per-socket reader
//     with recvmmsg/sendmmsg of that many datagrams through the socket's
//     RawConn; other platforms, and Endpoints (media-server connections)
//     everywhere, use goroutine readers with
//     ReadFromUDPAddrPort/WriteToUDPAddrPort. The packet is checked,
//     accounted (media/rtpstats, RFC 3550 A.1/A.3/A.8), rewritten in place
//     in the read buffer and sent from the socket facing the other leg
//     (by the poller: never waiting; a full send buffer loses the packet,
//     as UDP may). Everything it reads that Offer/Answer change is an
//     immutable legConf behind an atomic pointer; per-packet state belongs
//     to the forwarder of the leg, used by one goroutine at a time. No heap
//     allocation per packet (BenchmarkForwardRTP, BenchmarkForwardPath,
//     TestReaders, TestForwardPathsDoNotAllocate). The system calls are
//     raw (x/net's ReadBatch was not used because it allocates a net.Addr
//     per message): they cannot block (MSG_DONTWAIT, timeout 0), and the
//     scheduler notification of a plain system call (which also wakes a
//     parked sysmon thread) cost 9–17 % of the relay's CPU at 10 kpps and
//     up to 15 % at 50 kpps (bench/RESULTS.md, issue 16 item 5).
//     Measured side by side (bench/RESULTS.md, issue 4): at the design
//     point, one socket per stream at 50 packets/s, a per-socket batch
//     holds one packet, so Config.Batch costs more CPU per packet and 3–4×
//     the memory per call (16 buffers per socket); it only paid once
//     readers fell behind (beyond ~50k packets/s on this 2-core box).
//   - RTP and RTCP wire formats are github.com/pion/rtp and pion/rtcp's:
//     each RTP reader (sessions' and endpoints') owns one rtp.Packet and
//     Unmarshals every packet into it, so the payload (what G.711
//     transcoding rewrites) and the header extensions point into the read
//     buffer and the CSRC and extension slices are reused: after a
//     reader's first packet with CSRCs or an extension, parsing allocates
//     nothing. The rewritten header goes back into the read buffer with
//     Header.MarshalTo of the fixed 12 bytes only, and only when
//     something changed (payload type, SSRC rewrite, marker): the relay
//     never changes CSRCs, extensions or padding, and re-marshalling an
//     RFC 8285 block would normalise it (padding moved, elements after
//     ID 15 dropped) and could shift the payload; such packets pass byte
//     for byte (TestForwardPaths/ext-padding). RTCP compounds are walked
//     with rtcp.Header and SR/RR read into reused rtcp.SenderReport and
//     rtcp.ReceiverReport; the sender SSRC and SR RTP timestamp are then
//     written in place at their RFC 3550 offsets, because pion/rtcp v1.2
//     has no MarshalTo (Marshal allocates the packet anew). The one case
//     that allocates is a dropped one: pion builds its error for an RTP
//     packet whose CSRC list or header extension is truncated with
//     fmt.Errorf (2 allocations, 80–96 B, BenchmarkForwardMalformed); no
//     second parser is kept for it, since such a packet must come from
//     the latched source and is never relayed. Datagrams shorter than 12
//     bytes or not version 2 are refused before pion and allocate nothing.
//   - SRTP (SDES, RFC 4568), per leg and independent of the other leg:
//     each leg has a policy (SessionConfig.SRTP, else Config.SRTP): off
//     (plain RTP only; an RTP/SAVP offer is 488), offer (the box offers
//     RTP/SAVP with its a=crypto lines and accepts a plain answer; it
//     accepts plain and SRTP offers) or require (no usable a=crypto in the
//     leg's offer or answer is 488). Keys are per hop: the box never passes
//     a leg's a=crypto on, it writes its own (crypto/rand, one per suite:
//     AES_CM_128_HMAC_SHA1_80, AES_CM_128_HMAC_SHA1_32, AEAD_AES_128_GCM,
//     tags 1-3), so a plain phone can talk to an HQ that requires SRTP
//     and G.711 transcoding still works between the legs. The forwarder
//     authenticates and decrypts a leg's packets (github.com/pion/srtp/v3,
//     64-packet replay window) before anything else reads them, so an
//     unauthenticated packet neither is relayed nor steers latching; it is
//     counted in LegStats.SRTPAuthFailures (a replay in Dropped). The
//     packet is then encrypted in place for the other leg into the read
//     buffer's spare capacity (srtpSlack): no allocation per packet
//     (TestForwardSRTPDoesNotAllocate; pion allocates once per SSRC and
//     on refused packets only). RTCP is SRTCP on an SRTP leg. Keys live in
//     the session only: String/LogValue of sdprewrite.Crypto redact them,
//     errors name suites and lengths, logs the suite and tag.
//   - Inactivity: Run looks at every session each 100 ms; an established,
//     not-held session whose leg's accepted-packet counter has not moved
//     for InactivityTimeout gets OnInactive once (on its own goroutine).
//     Counters, not clocks, so the forwarding path reads no time for it.
//   - Goroutines: every goroutine reader belongs to its Session (Close
//     waits for them); a poller's goroutine belongs to the sockets it
//     serves (the last Session.Close that removes one waits for its end);
//     OnInactive callbacks and the scanner belong to the Relay; Run's
//     return closes every session and waits for all of them.
//
// # Not done here
//
// DTLS-SRTP and SDES with MKI or several keys, ICE, rtcp-mux (removed from the
// SDP, so the legs use separate RTCP ports), BUNDLE (answered unbundled),
// codecs other than G.711 transcoding, T.38 and data streams (rejected with
// port 0), late offers (INVITE without SDP), jitter buffering, and choosing
// the local addresses (the caller passes them, e.g. from media/selection).
package relay
