// Package fastpath answers UDP REGISTER and OPTIONS statelessly, on the
// socket's read goroutine, before sipgo's transaction layer sees them.
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
// capabilities for OPTIONS). TCP requests, in-dialog OPTIONS and every
// other method still go through sipgo's transaction layer: the fast path
// returns them untouched. It drops, and counts, datagrams that are not SIP.
package fastpath
