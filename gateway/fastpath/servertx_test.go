package fastpath

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// served is a rig whose path runs INVITE transactions: each INVITE's
// handler is handed to the test through calls and runs the function the
// test sends back on do, until do is closed.
type served struct {
	*rig
	calls chan servedCall
	acks  chan *sip.Request
}

type servedCall struct {
	req *sip.Request
	tx  sip.ServerTransaction
	do  chan func()
}

func newServed(t *testing.T) *served {
	s := &served{rig: newRig(t), calls: make(chan servedCall, 8), acks: make(chan *sip.Request, 8)}
	handle := func(req *sip.Request, tx sip.ServerTransaction) {
		c := servedCall{req, tx, make(chan func())}
		s.calls <- c
		for fn := range c.do {
			fn()
		}
	}
	s.p.Serve(Handlers{Invite: handle, Ack: func(req *sip.Request) { s.acks <- req }, Bye: handle})
	t.Cleanup(s.p.Wait)
	return s
}

// call waits for the next INVITE handed to the handler.
func (s *served) call() servedCall {
	s.t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(5 * time.Second):
		s.t.Fatal("the handler did not get the INVITE")
		return servedCall{}
	}
}

// respond makes the handler send code (with To tag "uas" unless 100).
func (c servedCall) respond(t *testing.T, code int) error {
	t.Helper()
	errc := make(chan error, 1)
	c.do <- func() {
		res := sip.NewResponseFromRequest(c.req, code, "X", nil)
		if to := res.To(); code > 100 && to != nil {
			to.Params.Add("tag", "uas")
		}
		errc <- c.tx.Respond(res)
	}
	return <-errc
}

// silent checks that nothing reaches the peer for a while.
func (s *served) silent(what string) {
	s.t.Helper()
	s.peer.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	if n, _, err := s.peer.ReadFrom(make([]byte, 4096)); err == nil {
		s.t.Fatalf("%s: unexpected datagram of %d bytes", what, n)
	}
}

func awaitDone(t *testing.T, tx sip.ServerTransaction) {
	t.Helper()
	select {
	case <-tx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("transaction did not end")
	}
}

// setTimers shortens sipgo's transaction timers for one test.
func setTimers(t *testing.T, g, t2, h, i, l time.Duration) {
	old := [5]time.Duration{sip.Timer_G, sip.T2, sip.Timer_H, sip.Timer_I, sip.Timer_L}
	sip.Timer_G, sip.T2, sip.Timer_H, sip.Timer_I, sip.Timer_L = g, t2, h, i, l
	t.Cleanup(func() {
		sip.Timer_G, sip.T2, sip.Timer_H, sip.Timer_I, sip.Timer_L = old[0], old[1], old[2], old[3], old[4]
	})
}

const authorized = "\r\nProxy-Authorization: Digest username=\"a\""

// An INVITE whose handler says nothing gets 100 Trying from its
// transaction 200 ms in (Timer_1xx, RFC 3261 §17.2.1), without a
// retransmission to prompt it; one whose handler rings first does not.
func TestServedInviteTrying(t *testing.T) {
	s := newServed(t)
	sent := time.Now()
	s.filter("UDP", request("INVITE", "z9hG4bK-t1", authorized))
	c := s.call()
	defer close(c.do)
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 100 Trying") {
		t.Fatalf("silent handler: got %q, want 100 Trying", got)
	}
	if took := time.Since(sent); took < sip.Timer_1xx {
		t.Fatalf("100 Trying after %v, before Timer_1xx (%v)", took, sip.Timer_1xx)
	}

	s.filter("UDP", request("INVITE", "z9hG4bK-t2", authorized))
	c2 := s.call()
	defer close(c2.do)
	if err := c2.respond(t, 180); err != nil {
		t.Fatal(err)
	}
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 180") {
		t.Fatalf("ringing handler: got %q, want 180", got)
	}
	c2.tx.(*serverTx).trying() // what Timer_1xx does
	if err := c2.respond(t, 200); err != nil {
		t.Fatal(err)
	}
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 200") {
		t.Fatalf("after the 180, Timer_1xx sent %q", got)
	}
}

// A served INVITE goes to the handler once: a retransmission before any
// answer gets 100 Trying, during ringing the last provisional again, after
// the 2xx nothing (RFC 6026 Accepted) while the TU's own 2xx
// retransmissions go out; the ACK of the 2xx (a new branch) goes to the
// ACK handler; OnTerminate runs at the 2xx (the TU's part is over); after
// Timer L the transaction is gone.
func TestServedInviteAnswered(t *testing.T) {
	setTimers(t, sip.Timer_G, sip.T2, sip.Timer_H, sip.Timer_I, 300*time.Millisecond)
	s := newServed(t)
	inv := request("INVITE", "z9hG4bK-a1", authorized)
	if out := s.filter("UDP", inv); out != nil {
		t.Fatal("served INVITE passed on to sipgo")
	}
	c := s.call()
	defer close(c.do)
	if c.req.Source() != s.peer.LocalAddr().String() || c.req.Transport() != "UDP" {
		t.Fatalf("request source %q transport %q", c.req.Source(), c.req.Transport())
	}
	if a := c.tx.(interface{ LocalAddr() net.Addr }).LocalAddr(); a.String() != s.listener.LocalAddr().String() {
		t.Fatalf("LocalAddr %v, want the listener's %v", a, s.listener.LocalAddr())
	}
	s.filter("UDP", inv)
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 100 Trying") {
		t.Fatalf("retransmission before any answer got %q", got)
	}
	if err := c.respond(t, 180); err != nil {
		t.Fatal(err)
	}
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 180") {
		t.Fatalf("provisional %q", got)
	}
	s.filter("UDP", inv)
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 180") || toTag(t, got) != "uas" {
		t.Fatalf("retransmission while ringing got %q", got)
	}
	ended := make(chan error, 2)
	if !c.tx.OnTerminate(func(_ string, err error) { ended <- err }) {
		t.Fatal("OnTerminate refused while ringing")
	}
	if err := c.respond(t, 200); err != nil {
		t.Fatal(err)
	}
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 200") {
		t.Fatalf("answer %q", got)
	}
	// The TU's part ends at the 2xx: OnTerminate has run (with no error),
	// long before Timer L, and is not kept.
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("OnTerminate at the 2xx with %v", err)
		}
	default:
		t.Fatal("OnTerminate did not run when the transaction entered Accepted")
	}
	s.filter("UDP", inv)
	s.silent("INVITE retransmitted after the 2xx")
	if err := c.respond(t, 200); err != nil {
		t.Fatalf("the TU's 2xx retransmission refused: %v", err)
	}
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 200") {
		t.Fatalf("2xx retransmission %q", got)
	}
	if out := s.filter("UDP", request("ACK", "z9hG4bK-ack", ";tag=uas")); out != nil {
		t.Fatal("ACK of the 2xx passed on to sipgo")
	}
	select {
	case ack := <-s.acks:
		if ack.Source() != s.peer.LocalAddr().String() {
			t.Fatalf("ACK source %q", ack.Source())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ACK of the 2xx not handed to the ACK handler")
	}
	if len(s.calls) != 0 {
		t.Fatal("a retransmission reached the handler")
	}
	awaitDone(t, c.tx)
	if err := c.tx.Err(); err != nil {
		t.Fatalf("Err after Timer L = %v", err)
	}
	if len(ended) != 0 {
		t.Fatal("OnTerminate ran again at the end of Timer L")
	}
	if n := s.p.txs.len(); n != 0 {
		t.Fatalf("%d transactions kept after Timer L", n)
	}
	if err := c.respond(t, 200); err == nil {
		t.Fatal("a 2xx after the transaction ended was accepted")
	}
}

// A final non-2xx is retransmitted (Timer G) until its ACK, which goes to
// Acks and stops the retransmissions; a retransmitted INVITE meanwhile
// gets it again; the transaction ends after Timer I. Without an ACK it
// ends after Timer H with ErrTransactionTimeout.
func TestServedInviteRefused(t *testing.T) {
	setTimers(t, 40*time.Millisecond, 80*time.Millisecond, 400*time.Millisecond, 100*time.Millisecond, sip.Timer_L)
	s := newServed(t)
	inv := request("INVITE", "z9hG4bK-r1", authorized)
	s.filter("UDP", inv)
	c := s.call()
	defer close(c.do)
	if err := c.respond(t, 486); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the answer, then Timer G's retransmissions
		if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 486") {
			t.Fatalf("datagram %d: %q", i, got)
		}
	}
	s.filter("UDP", inv)
	if got := s.read(); !strings.HasPrefix(got, "SIP/2.0 486") {
		t.Fatalf("retransmitted INVITE got %q", got)
	}
	ack := request("ACK", "z9hG4bK-r1", ";tag=uas")
	if out := s.filter("UDP", ack); out != nil {
		t.Fatal("ACK of the 486 passed on")
	}
	select {
	case <-c.tx.Acks():
	case <-time.After(5 * time.Second):
		t.Fatal("ACK not on Acks")
	}
	// A retransmission of G may have been on its way when the ACK came.
	s.peer.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		if _, _, err := s.peer.ReadFrom(make([]byte, 4096)); err != nil {
			break
		}
	}
	s.filter("UDP", ack) // absorbed by Confirmed (or, once it ended, a stray ACK)
	awaitDone(t, c.tx)
	if err := c.tx.Err(); err != nil {
		t.Fatalf("Err after the ACK = %v", err)
	}
	if len(s.acks) > 1 {
		t.Fatal("ACK of a non-2xx handed to the ACK handler")
	}

	s.filter("UDP", request("INVITE", "z9hG4bK-r2", authorized))
	c2 := s.call()
	defer close(c2.do)
	if err := c2.respond(t, 503); err != nil {
		t.Fatal(err)
	}
	awaitDone(t, c2.tx)
	if err := c2.tx.Err(); !errors.Is(err, sip.ErrTransactionTimeout) {
		t.Fatalf("Err without ACK = %v, want ErrTransactionTimeout", err)
	}
	n := 0
	s.peer.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	for {
		if _, _, err := s.peer.ReadFrom(make([]byte, 4096)); err != nil {
			break
		}
		n++
	}
	if n < 4 { // the answer and G at 40, 120, 200, 280, 360 ms
		t.Fatalf("%d copies of the 503 before Timer H, want >= 4", n)
	}
}

// A CANCEL gets 200 and the ringing INVITE 487 with the early dialog's
// tag, from the transaction, which tells the TU; the TU's answer after
// that is refused. A CANCEL matching no transaction goes on to sipgo.
func TestServedInviteCancelled(t *testing.T) {
	s := newServed(t)
	inv := request("INVITE", "z9hG4bK-c1", authorized)
	s.filter("UDP", inv)
	c := s.call()
	defer close(c.do)
	cancelled := make(chan *sip.Request, 1)
	reg := make(chan bool)
	c.do <- func() { reg <- c.tx.OnCancel(func(r *sip.Request) { cancelled <- r }) }
	if !<-reg {
		t.Fatal("OnCancel refused")
	}
	if err := c.respond(t, 180); err != nil {
		t.Fatal(err)
	}
	s.read()
	cancel := request("CANCEL", "z9hG4bK-c1", "")
	if out := s.filter("UDP", cancel); out != nil {
		t.Fatal("CANCEL passed on")
	}
	got := map[string]string{}
	for range 2 {
		m := s.read()
		got[m[:strings.Index(m, "\r\n")]] = m
	}
	ok, ok2 := got["SIP/2.0 200 OK"], got["SIP/2.0 487 Request Terminated"]
	if ok == "" || !strings.Contains(ok, "CSeq: 1 CANCEL") {
		t.Fatalf("no 200 for the CANCEL: %q", got)
	}
	if ok2 == "" || !strings.Contains(ok2, "CSeq: 1 INVITE") || toTag(t, ok2) != "uas" {
		t.Fatalf("no 487 with the early dialog's tag: %q", got)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("OnCancel not called")
	}
	if err := c.respond(t, 200); err == nil {
		t.Fatal("a 2xx after the CANCEL was accepted")
	}
	if !errors.Is(c.tx.Err(), sip.ErrTransactionCanceled) {
		t.Fatalf("Err = %v", c.tx.Err())
	}
	if out := s.filter("UDP", request("ACK", "z9hG4bK-c1", ";tag=uas")); out != nil {
		t.Fatal("ACK of the 487 passed on")
	}
	select {
	case <-c.tx.Acks():
	case <-time.After(5 * time.Second):
		t.Fatal("ACK of the 487 not on Acks")
	}
	stray := request("CANCEL", "z9hG4bK-none", "")
	if out := s.filter("UDP", stray); string(out) != stray {
		t.Fatal("a CANCEL matching nothing was not passed on")
	}
}

// A handler that returns without a final answer ends its transaction;
// an INVITE without an RFC 3261 branch, and its ACK, go to sipgo.
func TestServedInviteEdges(t *testing.T) {
	s := newServed(t)
	s.filter("UDP", request("INVITE", "z9hG4bK-e1", authorized))
	c := s.call()
	close(c.do)
	awaitDone(t, c.tx)
	if !errors.Is(c.tx.Err(), sip.ErrTransactionTerminated) {
		t.Fatalf("Err = %v", c.tx.Err())
	}
	if s.p.txs.len() != 0 {
		t.Fatal("transaction kept")
	}
	old := request("INVITE", "rfc2543", authorized)
	if out := s.filter("UDP", old); string(out) != old {
		t.Fatal("INVITE without an RFC 3261 branch not passed on")
	}
	oldAck := request("ACK", "rfc2543", ";tag=x")
	if out := s.filter("UDP", oldAck); string(out) != oldAck {
		t.Fatal("ACK without an RFC 3261 branch not passed on")
	}
	refused := request("INVITE", "z9hG4bK-e2", "")
	if out := s.filter("UDP", refused); out != nil {
		t.Fatal("refused INVITE passed on")
	}
	tag := toTag(t, s.read())
	if out := s.filter("UDP", request("ACK", "z9hG4bK-e2", ";tag="+tag)); out != nil {
		t.Fatal("ACK of a stateless refusal passed on")
	}
	if len(s.calls) != 0 || len(s.acks) != 0 {
		t.Fatal("a refused INVITE or its ACK reached a handler")
	}
}

// A BYE goes to the handler once: its retransmission is absorbed until the
// answer, then gets the answer again until Timer J ends the transaction.
func TestServedBye(t *testing.T) {
	old := sip.Timer_J
	sip.Timer_J = 300 * time.Millisecond
	t.Cleanup(func() { sip.Timer_J = old })
	s := newServed(t)
	bye := request("BYE", "z9hG4bK-b1", ";tag=uas")
	if out := s.filter("UDP", bye); out != nil {
		t.Fatal("BYE passed on to sipgo")
	}
	c := s.call()
	defer close(c.do)
	if c.req.Method != sip.BYE {
		t.Fatalf("handler got %s", c.req.Method)
	}
	s.filter("UDP", bye)
	s.silent("BYE retransmitted before its answer")
	if err := c.respond(t, 200); err != nil {
		t.Fatal(err)
	}
	first := s.read()
	if !strings.HasPrefix(first, "SIP/2.0 200") || !strings.Contains(first, "CSeq: 1 BYE") {
		t.Fatalf("answer %q", first)
	}
	s.filter("UDP", bye)
	if again := s.read(); again != first {
		t.Fatalf("retransmission got %q, want the answer again", again)
	}
	if len(s.calls) != 0 {
		t.Fatal("a retransmission reached the handler")
	}
	awaitDone(t, c.tx)
	if err := c.tx.Err(); err != nil {
		t.Fatalf("Err after Timer J = %v", err)
	}
	if n := s.p.txs.len(); n != 0 {
		t.Fatalf("%d transactions kept after Timer J", n)
	}
	if out := s.filter("UDP", request("CANCEL", "z9hG4bK-b1", "")); out == nil {
		t.Fatal("a CANCEL with a BYE's branch was taken")
	}
}
