package fastpath

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
)

// Server transactions of our own for UDP INVITEs and BYEs (issue 16
// item 1).
//
// sipgo gives every request a goroutine, a context with a 10 s timer, a
// ServerTx with its state machine, locks and up to five timers (1xx, G,
// H, I, L), its own parse of the datagram the path has already parsed,
// and, for the ACK of a 2xx, which needs no transaction at all, a whole
// server transaction too. The path already parses every INVITE (to admit
// it), so it keeps the transaction itself (RFC 3261 §17.2.1 with RFC
// 6026's Accepted state); measured against sipgo's at 900 calls/s under
// half a CPU: 14 % less CPU and 15 % fewer bytes allocated a call
// (bench/RESULTS.md, issue 16 item 1):
//
//   - Proceeding: the transaction sends 100 Trying itself when the TU has
//     sent nothing 200 ms (sipgo's Timer_1xx) after the INVITE arrived
//     (§17.2.1: the 100 is owed unless the TU answers within 200 ms). The
//     TU does not send one at once: a call whose callee rings within
//     200 ms, as a branch phone does, gets its 180 and no 100, and saves
//     a response built, written and read (4 % of the CPU of a call at
//     1,300 calls/s under half a CPU, bench/RESULTS.md issue 16 item 1).
//     Every INVITE waits the same time, so one FIFO and one timer serve
//     them all (below). A retransmitted INVITE gets the last provisional
//     again, or 100 Trying when there is none yet.
//   - A 2xx moves it to Accepted (RFC 6026 §7.1): retransmissions of the
//     INVITE are absorbed, the TU's retransmissions of its 2xx are sent,
//     and it ends after Timer L (sipgo's, which the gateway shortens:
//     retainFinished). These expiries share one timer: every Accepted
//     transaction lives the same time, so they end in the order they
//     entered it (a FIFO). Its OnTerminate functions run as it enters
//     Accepted, not at the end of Timer L, and then are let go: from the
//     2xx on the dialog is the TU's (RFC 6026 §7.1; a CANCEL no longer
//     applies, and sipgo's dialog session ignores the end of a
//     transaction whose dialog is established), and what they hold
//     (sipgo's dialog session, its INVITE and 2xx) would otherwise stay
//     on the heap for Timer L after every call (BenchmarkCall's
//     live-B/call, bench/RESULTS.md issue 16 item 1).
//   - A final non-2xx moves it to Completed: the answer is retransmitted
//     (Timer G, T1 doubling to T2) until its ACK, which moves it to
//     Confirmed for Timer I (T4) and goes to Acks(); without an ACK it
//     ends after Timer H with ErrTransactionTimeout. One timer per
//     transaction, only on this path.
//   - A CANCEL with the INVITE's branch from the same source gets 200; a
//     transaction still in Proceeding answers 487 itself (as sipgo's does)
//     and tells the TU (OnCancel). A CANCEL matching nothing goes to sipgo,
//     whose 481 the gateway sends.
//   - An ACK matching no transaction here is the ACK of a 2xx (a new
//     branch, RFC 3261 §17.1.1.3): it goes to the gateway's ACK handler
//     directly, without any transaction.
//   - A BYE gets a non-INVITE server transaction (RFC 3261 §17.2.2):
//     retransmissions are absorbed until the TU answers, then get the
//     last answer again; a final answer ends it after Timer J (the same
//     FIFO of expiries as Accepted).
//
// A transaction is keyed by its top Via branch (RFC 3261 magic cookie
// required; an older client's INVITE goes to sipgo, and so does its ACK)
// and the address the INVITE came from, which a retransmission, its
// CANCEL and the ACK of a non-2xx share. Responses go to that address
// (RFC 3581), as sipgo sends them.

// Handlers are what the path runs the requests it keeps transactions for
// with, each on a goroutine of its own. A request handler that returns
// without a final response ends its transaction.
type Handlers struct {
	// Invite: the UDP INVITEs the path admits (Admit) and in-dialog ones.
	Invite func(req *sip.Request, tx sip.ServerTransaction)
	// Ack: the ACK of a 2xx, which belongs to a dialog and no transaction
	// (RFC 3261 §17.1.1.3).
	Ack func(req *sip.Request)
	// Bye: UDP BYEs.
	Bye func(req *sip.Request, tx sip.ServerTransaction)
}

// Serve makes the path keep the server transactions of UDP INVITEs and
// BYEs and run them with h, and hand the ACKs of 2xx responses to h.Ack;
// without it, they go to sipgo. Every handler must be set. The handlers'
// goroutines end before Wait returns.
func (f *Path) Serve(h Handlers) { f.serve = &h }

// Wait waits for the handlers Serve started (call it once the sockets are
// closed).
func (f *Path) Wait() { f.handlers.Wait() }

// txState is where a transaction is (RFC 3261 Figure 7 + RFC 6026).
type txState uint8

const (
	txProceeding txState = iota
	txAccepted
	txCompleted
	txConfirmed
	txTerminated
)

// serverTxs is the path's server transactions by key.
type serverTxs struct {
	mu sync.Mutex
	m  map[string]*serverTx
	// Transactions that end after a fixed time: INVITEs in Accepted
	// (Timer L), BYEs in Completed (Timer J).
	accepted, completed expiries
	// INVITEs owed a 100 Trying if their TU stays silent (Timer_1xx).
	trying expiries
}

func newServerTxs() *serverTxs {
	t := &serverTxs{m: map[string]*serverTx{}}
	t.accepted.due = func(tx *serverTx) { tx.end(nil) }
	t.completed.due = t.accepted.due
	t.trying.due = (*serverTx).trying
	return t
}

// txKey is a transaction's key: the top Via branch, the source and, but
// for INVITE (which its ACK and CANCEL match), the method.
func txKey(branch, src, method string) string {
	if method == string(sip.INVITE) {
		return branch + "|" + src
	}
	return branch + "|" + src + "|" + method
}

func (t *serverTxs) get(key string) *serverTx {
	t.mu.Lock()
	tx := t.m[key]
	t.mu.Unlock()
	return tx
}

// add stores tx unless a transaction has its key (then returns false).
func (t *serverTxs) add(tx *serverTx) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[tx.key]; ok {
		return false
	}
	t.m[tx.key] = tx
	return true
}

func (t *serverTxs) remove(tx *serverTx) {
	t.mu.Lock()
	if t.m[tx.key] == tx {
		delete(t.m, tx.key)
	}
	t.mu.Unlock()
}

// len is how many transactions are kept (tests).
func (t *serverTxs) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// expiries runs due on transactions a fixed time after they entered a
// state (to end them, or to send 100 Trying): the time is the same for
// all, so they come due in the order they entered it, and a FIFO and one
// timer for its head do instead of a timer each.
//
// The FIFO is a slice read from head: taking the due ones off moves
// nothing, and the slice is compacted in place only when it is full and
// at least half of it is taken, so a call's expiry costs O(1) however
// long the queue (a copy of the queue each time the timer fired was a
// tenth of BenchmarkCall's CPU, most of it the collector's write
// barrier).
type expiries struct {
	due   func(*serverTx)
	mu    sync.Mutex
	queue []expiry
	head  int // queue[:head] are taken and cleared
	timer *time.Timer
}

type expiry struct {
	tx    *serverTx
	until time.Time
}

// add queues tx to come due after d.
func (e *expiries) add(tx *serverTx, d time.Duration) {
	until := time.Now().Add(d)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.head > 0 && e.head >= len(e.queue)/2 && len(e.queue) == cap(e.queue) {
		rest := copy(e.queue, e.queue[e.head:])
		clear(e.queue[rest:])
		e.queue, e.head = e.queue[:rest], 0
	}
	e.queue = append(e.queue, expiry{tx, until})
	if len(e.queue)-e.head == 1 {
		e.armLocked(until)
	}
}

func (e *expiries) armLocked(until time.Time) {
	d := time.Until(until)
	if e.timer == nil {
		e.timer = time.AfterFunc(d, e.expire)
		return
	}
	e.timer.Reset(d)
}

// expire runs due on the transactions whose time has come and arms the
// timer for the next.
func (e *expiries) expire() { e.expireAt(time.Now()) }

func (e *expiries) expireAt(now time.Time) {
	var due []*serverTx
	e.mu.Lock()
	for e.head < len(e.queue) && !e.queue[e.head].until.After(now) {
		due = append(due, e.queue[e.head].tx)
		e.queue[e.head] = expiry{}
		e.head++
	}
	if e.head == len(e.queue) {
		e.queue, e.head = e.queue[:0], 0
	} else {
		e.armLocked(e.queue[e.head].until)
	}
	e.mu.Unlock()
	for _, tx := range due {
		e.due(tx)
	}
}

// serverTx is one INVITE or BYE server transaction over UDP; it
// implements sip.ServerTransaction for the gateway's handlers and sipgo's
// dialogs.
type serverTx struct {
	f      *Path
	key    string
	method sip.RequestMethod
	local  net.Addr // the listener it arrived on (LocalAddr)
	pc     net.PacketConn
	dst    net.Addr

	mu    sync.Mutex
	state txState
	// req is the request while an answer may still be made from it
	// (Proceeding, and an INVITE's Completed); a finished transaction
	// keeps only what it resends: an INVITE in Accepted nothing, a BYE
	// its final answer's bytes (final).
	req      *sip.Request
	last     *sip.Response // Proceeding: the last provisional; an INVITE's Completed, Confirmed: the final
	final    []byte
	err      error
	timer    *time.Timer // Completed: G and H; Confirmed: I
	interval time.Duration
	giveUp   time.Time // Completed: Timer H; Confirmed: Timer I
	onCancel []sip.FnTxCancel
	onEnd    []sip.FnTxTerminate
	done     chan struct{}     // made by Done or end, whichever comes first
	acks     chan *sip.Request // made by Acks or ack, whichever comes first
}

// closedDone is the Done of a transaction that ended before anyone asked.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

var _ sip.ServerTransaction = (*serverTx)(nil)

// invite: an INVITE transaction (else a BYE's).
func (tx *serverTx) invite() bool { return tx.method == sip.INVITE }

// LocalAddr is the address of the listener the INVITE arrived on.
func (tx *serverTx) LocalAddr() net.Addr { return tx.local }

// send writes res to the transaction's source; keep returns a copy of
// the bytes sent.
func (tx *serverTx) send(res *sip.Response, keep bool) []byte {
	return tx.f.writeResponse(tx.pc, res, tx.dst, keep)
}

// Respond sends res: see the package's state rules. It sends under the
// lock, so that answers leave in the order of their state changes.
func (tx *serverTx) Respond(res *sip.Response) error {
	tx.mu.Lock()
	var ended []sip.FnTxTerminate
	defer func() {
		tx.mu.Unlock()
		for _, fn := range ended {
			fn(tx.key, nil)
		}
	}()
	switch {
	case tx.state == txProceeding && res.IsProvisional():
		tx.last = res
	case tx.state == txProceeding && !tx.invite():
		tx.state, tx.last, tx.req = txCompleted, nil, nil
		tx.final = tx.send(res, true)
		tx.f.txs.completed.add(tx, sip.Timer_J)
		return nil
	case tx.state == txProceeding && res.IsSuccess():
		tx.state, tx.last, tx.req = txAccepted, nil, nil
		ended, tx.onEnd, tx.onCancel = tx.onEnd, nil, nil
		tx.f.txs.accepted.add(tx, sip.Timer_L)
	case tx.state == txProceeding:
		tx.completeLocked(res)
	case tx.state == txAccepted && res.IsSuccess():
		// the TU retransmits its 2xx (RFC 6026 §8.7)
	default:
		err := tx.err
		if err == nil {
			err = sip.ErrTransactionTerminated
		}
		return fmt.Errorf("response %d to %s in transaction state %d: %w", res.StatusCode, tx.method, tx.state, err)
	}
	tx.send(res, false)
	return nil
}

// completeLocked moves to Completed with final answer res (not yet sent)
// and starts Timers G and H.
func (tx *serverTx) completeLocked(res *sip.Response) {
	tx.state, tx.last = txCompleted, res
	tx.interval = sip.Timer_G
	tx.giveUp = time.Now().Add(sip.Timer_H)
	tx.timer = time.AfterFunc(tx.interval, tx.onTimer)
}

// onTimer is Timer G (retransmit the final answer), H (no ACK: give up)
// and I (Confirmed is over).
func (tx *serverTx) onTimer() {
	tx.mu.Lock()
	switch tx.state {
	case txCompleted:
		if !time.Now().Before(tx.giveUp) {
			tx.mu.Unlock()
			tx.end(sip.ErrTransactionTimeout)
			return
		}
		tx.interval = min(2*tx.interval, sip.T2)
		tx.timer.Reset(min(tx.interval, time.Until(tx.giveUp)))
		res := tx.last
		tx.mu.Unlock()
		tx.send(res, false)
	case txConfirmed:
		if left := time.Until(tx.giveUp); left > 0 {
			tx.timer.Reset(left) // G fired as the ACK came
			tx.mu.Unlock()
			return
		}
		tx.mu.Unlock()
		tx.end(nil)
	default:
		tx.mu.Unlock()
	}
}

// retransmission handles the request again.
func (tx *serverTx) retransmission() {
	tx.mu.Lock()
	res, final := tx.last, tx.final
	switch tx.state {
	case txProceeding:
		if res == nil && tx.invite() {
			res = tx.tryingLocked()
		}
	case txCompleted:
	default:
		res = nil // Accepted, Confirmed: absorbed (a BYE's Trying too)
	}
	tx.mu.Unlock()
	switch {
	case final != nil:
		tx.f.write(tx.pc, final, tx.dst)
	case res != nil:
		tx.send(res, false)
	}
}

// trying sends 100 Trying unless the TU has answered (Timer_1xx).
func (tx *serverTx) trying() {
	tx.mu.Lock()
	var res *sip.Response
	if tx.state == txProceeding && tx.last == nil {
		res = tx.tryingLocked()
	}
	tx.mu.Unlock()
	if res != nil {
		tx.send(res, false)
	}
}

// tryingLocked makes the INVITE's 100 Trying its last provisional.
func (tx *serverTx) tryingLocked() *sip.Response {
	tx.last = sip.NewResponseFromRequest(tx.req, sip.StatusTrying, "Trying", nil)
	return tx.last
}

// ack handles the ACK of the final non-2xx answer.
func (tx *serverTx) ack(req *sip.Request) {
	tx.mu.Lock()
	if tx.state != txCompleted || !tx.invite() {
		tx.mu.Unlock()
		return // a retransmitted ACK, or a stray one
	}
	tx.state = txConfirmed
	tx.giveUp = time.Now().Add(sip.Timer_I)
	tx.timer.Reset(sip.Timer_I)
	if tx.acks == nil {
		tx.acks = make(chan *sip.Request, 1)
	}
	tx.acks <- req // the first ACK: the channel is empty
	tx.mu.Unlock()
}

// cancel handles a CANCEL of the INVITE: 200 to it, and 487 to the INVITE
// while it has no final answer.
func (tx *serverTx) cancel(req *sip.Request) {
	tx.send(sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil), false)
	tx.mu.Lock()
	if tx.state != txProceeding || !tx.invite() {
		tx.mu.Unlock()
		return
	}
	res := sip.NewResponseFromRequest(tx.req, sip.StatusRequestTerminated, "Request Terminated", nil)
	if tx.last != nil {
		// The tag of the provisionals sent (the early dialog's), not a new one.
		if to, lastTo := res.To(), tx.last.To(); to != nil && lastTo != nil {
			if tag, ok := lastTo.Params.Get("tag"); ok {
				to.Params.Add("tag", tag)
			}
		}
	}
	tx.err = sip.ErrTransactionCanceled
	tx.completeLocked(res)
	tx.send(res, false)
	fns := tx.onCancel
	tx.mu.Unlock()
	for _, fn := range fns {
		fn(req)
	}
}

// end terminates the transaction with err (nil: normally) once.
func (tx *serverTx) end(err error) {
	tx.mu.Lock()
	if tx.state == txTerminated {
		tx.mu.Unlock()
		return
	}
	tx.state, tx.last, tx.req, tx.final = txTerminated, nil, nil, nil
	if tx.err == nil {
		tx.err = err
	}
	done := tx.done
	if done == nil {
		tx.done = closedDone
	}
	if tx.timer != nil {
		tx.timer.Stop()
	}
	fns := tx.onEnd
	tx.onEnd, tx.onCancel = nil, nil
	err = tx.err
	tx.mu.Unlock()
	tx.f.txs.remove(tx) // before Done: whoever waits on it finds the table without it
	if done != nil {
		close(done)
	}
	for _, fn := range fns {
		fn(tx.key, err)
	}
}

// Terminate ends the transaction now (sip.Transaction).
func (tx *serverTx) Terminate() { tx.end(sip.ErrTransactionTerminated) }

// handled is called when the handler returns: a transaction without a
// final answer is over (sipgo's TerminateGracefully).
func (tx *serverTx) handled() {
	tx.mu.Lock()
	open := tx.state == txProceeding
	tx.mu.Unlock()
	if open {
		tx.Terminate()
	}
}

// OnTerminate registers f to run when the transaction ends; false when it
// has ended already.
func (tx *serverTx) OnTerminate(f sip.FnTxTerminate) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.state == txTerminated {
		return false
	}
	tx.onEnd = append(tx.onEnd, f)
	return true
}

// OnCancel registers f to run when a CANCEL arrives; false when the
// transaction has ended.
func (tx *serverTx) OnCancel(f sip.FnTxCancel) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.state == txTerminated {
		return false
	}
	tx.onCancel = append(tx.onCancel, f)
	return true
}

func (tx *serverTx) Done() <-chan struct{} {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done == nil {
		tx.done = make(chan struct{})
	}
	return tx.done
}

func (tx *serverTx) Err() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.err
}

func (tx *serverTx) Acks() <-chan *sip.Request {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.acks == nil {
		tx.acks = make(chan *sip.Request, 1)
	}
	return tx.acks
}
