package gateway

import (
	"time"

	"github.com/emiago/sipgo/sip"
)

// How long finished transactions are kept (issue 16 item 1).
//
// RFC 3261/6026 keep a finished transaction for 64*T1 (32 s) over UDP:
// an INVITE server transaction that sent a 2xx (Timer L) absorbs
// retransmissions of the INVITE, an INVITE client transaction that got a
// 2xx (Timer M) hands the 2xx's retransmissions to the core to be
// re-ACKed, a non-INVITE server transaction (Timer J) answers the
// request's retransmissions again. sipgo keeps the whole transaction for
// that time (request, response, timers: about 6 KiB for the three of a
// call), so at a few hundred calls per second tens of MiB are finished
// calls, the overload gate's memory criterion sheds new calls long before
// the CPU is busy, and the collector works on a heap mostly made of them
// (bench/RESULTS.md, issue 16 item 1).
//
// Decision: keep them retainFinished (2 s = 4*T1) instead, and keep the
// 32 s duties cheaply where they matter:
//   - Timer L: a retransmission of an initial UDP INVITE after its
//     transaction is gone is absorbed by the admitted-INVITE set
//     (invite.go, 32 s, 16 bytes a call): onInvite ends the new
//     transaction made for it without a word, so it never becomes a
//     second call. A caller retransmits its INVITE only until it has a
//     provisional answer (the box sends one within 200 ms: 100 Trying
//     when nothing sooner), so this is the lost-provisional case.
//   - Timer M: the callee retransmits its 2xx only while our ACK is lost;
//     within 2 s it does so twice (0.5 and 1.5 s after the first) and
//     each is re-ACKed. The B2BUA ends sipgo's INVITE client transaction
//     at the 2xx (Timer M 0) and keeps only its ACK, as bytes, for 2 to
//     3 s (gateway/b2bua/acks.go), which it re-sends when the transaction
//     layer hands it a 2xx that no transaction takes (New's
//     unhandled-response handler). A 2xx whose three ACKs were all lost (at 1 % loss, one
//     call in a million) is not re-ACKed afterwards, and the callee ends
//     that call after 32 s: accepted.
//   - Timer J: a BYE (or other non-INVITE request) whose 200 was lost is
//     answered again for 2 s (two retransmissions); later ones get 481,
//     which ends the sender's transaction as well: both mean the dialog
//     is over.
//   - Timer K (T4, 5 s, a non-INVITE client transaction after its final
//     response): it only absorbs duplicates of that response, which a
//     server sends when our own retransmissions reach it, so they arrive
//     within a round trip of the last one; 2 s is plenty.
//
// 4 s was measured first: at 1,000 calls/s the finished transactions of
// the last seconds were more than half of the live heap and the overload
// gate's memory criterion shed calls with the CPU a fifth busy
// (bench/RESULTS.md, issue 16 item 1).
//
// Timers D (a non-2xx answer to our INVITE) and H (our non-2xx answer
// awaiting its ACK) keep their RFC values: they end early when the ACK
// comes and are not on the path of a call that is answered.
const retainFinished = 4 * 500 * time.Millisecond

// The fast path's UDP INVITE and BYE server transactions
// (fastpath/servertx.go) read Timer L and Timer J from the same variables.
//
// sipgo reads these package variables when a transaction reaches the state;
// set once, before any transaction exists (package initialisation).
func init() {
	sip.Timer_L = retainFinished
	sip.Timer_J = retainFinished
	sip.Timer_K = retainFinished
}
