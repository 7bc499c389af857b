package b2bua

import (
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// TestAnsweredCallDropsSetup: once the caller has ACKed our 2xx and the
// callee has our ACK, the call keeps its parties' dialog state and drops
// what made it (A's INVITE and transaction, the sipgo dialog sessions of
// both legs, the offer): a call up costs the overload gate's memory
// criterion and the collector half as much. The call goes on without
// them: a re-INVITE and the callee's BYE still cross the box.
func TestAnsweredCallDropsSetup(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")

	var c *call
	e.b.mu.Lock()
	for _, x := range e.b.calls {
		c = x
	}
	e.b.mu.Unlock()
	if c == nil {
		t.Fatal("no call listed")
	}
	dropped := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.setup.a != nil || c.setup.aTx != nil || c.setup.aReq != nil || c.setup.offer != nil || c.setup.early != nil {
			return false
		}
		for _, p := range c.parties { // c is their home: c.mu guards them
			if p.setup.srv != nil || p.setup.cli != nil {
				return false
			}
		}
		return true
	}
	// Both setupDone calls follow messages the phones have already seen
	// (our 2xx's ACK, our ACK to B): no event to wait on, so poll.
	for deadline := time.Now().Add(wait); !dropped(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the answered call still holds its setup state")
		}
	}

	if res := a.send(ctx, oc.sess, oc.boxOf(), sip.INVITE, mkSDP("a", 1, 2, 40000, "sendonly"), ""); res == nil || res.StatusCode != 200 {
		t.Fatalf("re-INVITE after the setup was dropped: %v", res)
	}
	recv(t, b.reinvites, "re-INVITE at B")
	if err := d.Bye(ctx); err != nil {
		t.Fatalf("B's bye: %v", err)
	}
	recv(t, a.byes, "BYE at A")
	e.noCalls()
}
