// Package fastpath answers UDP REGISTER and OPTIONS statelessly, on the
// socket's read goroutine, before sipgo's transaction layer sees them, and
// keeps the server transactions of UDP INVITEs and BYEs itself
// (servertx.go).
//
// Why: sipgo keeps every non-INVITE server transaction for Timer J (32 s
// over UDP) with its request, response, timers and goroutine. At a few
// thousand registrations per second that is hundreds of megabytes and most
// of the CPU; a branch box has neither. A registrar needs none of it: the
// only job of the transaction here is to answer a retransmitted request
// with the same response (RFC 3261 §17.2.2), which a small cache of
// response bytes keyed by the request's branch does for a fraction of the
// cost. Kamailio's registrar answers statelessly for the same reason.
//
// The path parses, deduplicates and sends; the answer itself comes from
// the gateway (an Answer function: the registrar for REGISTER, the
// capabilities for OPTIONS).
//
// New (out-of-dialog) UDP INVITEs are admitted here too, by the gateway's
// Admit function: a trusted trunk's INVITE, or one whose credentials
// verify, gets a server transaction of the path's own (servertx.go) and
// goes to the gateway's handler (without Serve: on to sipgo untouched);
// any other is refused statelessly
// (RFC 3261 §8.2.7): its 407, 403 or 400 is sent once, not retransmitted,
// with a To tag derived from the request (a retransmission gets the same
// one) that marks it, and nothing is kept; the ACK of such a refusal is
// dropped. Refusals to one source IP are limited to RefusalRate per second
// (burst RefusalBurst); beyond that they are dropped and counted. A
// server transaction would instead have kept the request for 32 s and
// sent its 407 eleven times to whatever source the packet claimed.
//
// What a REGISTER costs (BenchmarkFastPathRegister in gateway: REGISTER in,
// 401 out, REGISTER with credentials in, 200 out): a plain REGISTER or
// OPTIONS (CRLF lines, no folding, no comma-separated typed header, no
// body) is parsed by parsePlain into one string whose pieces go to sipgo's
// own URI and header parsers, so it becomes the same sip.Request
// sip.ParseMessage makes (FuzzParseRequest compares the two; anything
// else is parsed by sipgo). The path tags the request's To itself, so the
// registrar's answer can carry the request's Via, From, To, Call-ID and
// CSeq objects, which writeAnswer writes as the lines they arrived as
// (RFC 3261 §8.2.6.2 copies them; no second serialization); the rest of
// the answer is sipgo's serialization. The retransmission cache keeps
// answers in a ring of bytes indexed by hash (cache.go): nothing for the
// garbage collector to scan, no allocation per answer. The listener under
// sipgo's read loop takes up to 16 datagrams per recvmmsg
// (gateway/listen). Not done: each answer is its own sendto (batching the
// answers of a batch of requests needs the path to own the socket's reads,
// which sipgo's TransportReadFilter does not allow); a retransmission is
// parsed before it is found in the answer cache.
//
// With Serve, in-dialog UDP INVITEs get the path's transactions too, and
// CANCELs and ACKs are matched to them; the ACK of a 2xx goes to the
// gateway's handler without any transaction. TCP requests, other
// in-dialog requests and every other method still go through sipgo's
// transaction layer: the fast path returns them untouched. It drops, and
// counts by kind (Drops), datagrams that are not SIP or do not parse,
// refusals over the rate, and stateless ACKs.
package fastpath
