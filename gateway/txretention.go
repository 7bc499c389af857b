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
// Decision: keep them retainFinished (4 s = 8*T1) instead, and keep the
// 32 s duties cheaply where they matter:
//   - Timer L: a retransmission of an initial UDP INVITE after its
//     transaction is gone is absorbed by the admitted-INVITE set
//     (invite.go, 32 s, 16 bytes a call): onInvite ends the new
//     transaction sipgo made for it without a word, so it never becomes a
//     second call. A caller retransmits its INVITE only until it has a
//     provisional answer (the box sends 100 Trying at once), so this is
//     the lost-100 case.
//   - Timer M: the callee retransmits its 2xx only while our ACK is lost;
//     within 4 s it does so three times (0.5, 1.5, 3.5 s) and each is
//     re-ACKed. A 2xx whose four ACKs were all lost is not re-ACKed
//     afterwards (sipgo drops a response without a transaction), and the
//     callee ends that call after 32 s: accepted.
//   - Timer J: a BYE (or other non-INVITE request) whose 200 was lost is
//     answered again for 4 s (three retransmissions); later ones get 481,
//     which ends the sender's transaction as well: both mean the dialog
//     is over.
//
// Timers D (a non-2xx answer to our INVITE) and H (our non-2xx answer
// awaiting its ACK) keep their RFC values: they end early when the ACK
// comes and are not on the path of a call that is answered.
const retainFinished = 8 * 500 * time.Millisecond

// sipgo reads these package variables when a transaction reaches the state;
// set once, before any transaction exists (package initialisation).
func init() {
	sip.Timer_L = retainFinished
	sip.Timer_M = retainFinished
	sip.Timer_J = retainFinished
}
