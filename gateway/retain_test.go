package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// An INVITE retransmitted after its server transaction was let go
// (retainFinished, not RFC 6026's 32 s) is absorbed: no second call, no
// answer; the call it belongs to goes on.
func TestLateInviteRetransmissionAbsorbed(t *testing.T) {
	s, gw, callee := pstnCall(t)

	invite := gw.newInvite("late-1", "z9hG4bK-late1", "+15551001")
	gw.send(invite)
	bleg := callee.readRequest("INVITE")
	callee.send(reply(bleg, "200 OK", "cl1"))
	ok := gw.readStatus("200")
	gw.send(inDialog("ACK", ok, gw, 1))
	callee.readRequest("ACK")

	// Retransmit as a caller that lost every answer would (every T1),
	// until one arrives after the transaction is gone and is absorbed.
	deadline := time.Now().Add(retainFinished + 10*time.Second)
	for s.lateInvites.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no retransmission absorbed within %v; calls: %d", retainFinished+10*time.Second, len(s.Calls()))
		}
		gw.send(invite)
		time.Sleep(500 * time.Millisecond) // T1: the caller's pace, not a synchronisation
	}
	if n := len(s.Calls()); n != 1 {
		t.Fatalf("%d calls after the late retransmission, want 1", n)
	}
	if got := s.DroppedByKind()["late_retransmission"]; got == 0 {
		t.Fatal("late_retransmission not counted")
	}

	// The call goes on: BYE crosses the box; the callee saw no second
	// INVITE in between.
	gw.send(inDialog("BYE", ok, gw, 2))
	bye := callee.read()
	if !strings.HasPrefix(bye, "BYE ") {
		t.Fatalf("callee got, instead of the BYE:\n%s", bye)
	}
	callee.send(reply(bye, "200 OK", "cl1"))
	gw.readStatus("200")
}

// TestRetransmitted2xxReAcked: RFC 3261 §13.2.2.4 — a callee whose ACK
// was lost retransmits its 2xx. sipgo's INVITE client transaction ended
// at the 2xx (Timer M 0), so the retransmission reaches the B2BUA as a
// stray response, which re-sends the ACK it kept (b2bua/acks.go): the
// same message, again at each retransmission. The callee retransmits at
// the RFC's pace (Timer G: T1, then 2*T1 later), as a UAS does: the ACK
// is kept right after it is sent, and a 2xx sent back the instant the
// ACK arrives could cross that.
func TestRetransmitted2xxReAcked(t *testing.T) {
	_, gw, callee := pstnCall(t)

	gw.send(gw.newInvite("reack-1", "z9hG4bK-reack1", "+15551001"))
	bleg := callee.readRequest("INVITE")
	answer := reply(bleg, "200 OK", "cl1")
	callee.send(answer)
	ok := gw.readStatus("200")
	gw.send(inDialog("ACK", ok, gw, 1))
	first := callee.readRequest("ACK")
	for i, gap := range []time.Duration{500 * time.Millisecond, time.Second} {
		time.Sleep(gap) // the callee's Timer G, not a synchronisation
		callee.send(answer)
		if again := callee.readRequest("ACK"); again != first {
			t.Fatalf("retransmission %d: ACK\n%s\nwant the first one again:\n%s", i+1, again, first)
		}
	}

	gw.send(inDialog("BYE", ok, gw, 2))
	bye := callee.readRequest("BYE")
	callee.send(reply(bye, "200 OK", "cl1"))
	gw.readStatus("200")
}

// TestForked2xxAckedAndEnded: RFC 3261 §13.2.2.4 — a 2xx from another
// fork of our INVITE (another To tag, as a forking proxy relays when two
// phones answer at once) is ACKed and its dialog ended with a BYE; the
// fork's retransmission gets its ACK again, no second BYE; the winner's
// call goes on.
func TestForked2xxAckedAndEnded(t *testing.T) {
	_, gw, callee := pstnCall(t)

	gw.send(gw.newInvite("fork-1", "z9hG4bK-fork1", "+15551001"))
	bleg := callee.readRequest("INVITE")
	callee.send(reply(bleg, "200 OK", "cl1"))
	ok := gw.readStatus("200")
	gw.send(inDialog("ACK", ok, gw, 1))
	callee.readRequest("ACK")

	// The fork's 2xx may cross the ACK of the winner's being kept (right
	// after it is sent); its UAS retransmits it until ACKed.
	fork := reply(bleg, "200 OK", "cl2")
	ack := callee.retransmitUntil(fork, "ACK")
	bye := callee.readRequest("BYE")
	for _, c := range []struct{ msg, cseq string }{{ack, "1 ACK"}, {bye, "2 BYE"}} {
		if to := header(c.msg, "To"); !strings.Contains(to, "tag=cl2") {
			t.Errorf("%s went to To %q, want the fork's tag cl2", c.cseq, to)
		}
		if got := header(c.msg, "CSeq"); got != c.cseq {
			t.Errorf("CSeq %q, want %q", got, c.cseq)
		}
		if got, want := header(c.msg, "Call-ID"), header(bleg, "Call-ID"); got != want {
			t.Errorf("%s Call-ID %q, want the INVITE's %q", c.cseq, got, want)
		}
	}
	callee.send(reply(bye, "200 OK", "cl2"))

	if again := callee.retransmitUntil(fork, "ACK"); again != ack {
		t.Fatalf("fork's retransmission: ACK\n%s\nwant the first one again:\n%s", again, ack)
	}

	// The winner's call goes on: the caller's BYE is the next request the
	// callee gets (a second BYE of the fork would come first).
	gw.send(inDialog("BYE", ok, gw, 2))
	end := callee.readRequest("BYE")
	if to := header(end, "To"); !strings.Contains(to, "tag=cl1") {
		t.Fatalf("BYE to To %q, want the winner's tag cl1", to)
	}
	callee.send(reply(end, "200 OK", "cl1"))
	gw.readStatus("200")
}

// retransmitUntil sends msg, a 2xx, and retransmits it as a UAS does
// (RFC 3261 §13.3.1.4: T1, then doubling) until a request of the method
// arrives, which it returns.
func (p *phone) retransmitUntil(msg, method string) string {
	p.t.Helper()
	buf := make([]byte, 65536)
	for gap := sip.T1; gap <= 8*sip.T1; gap *= 2 {
		p.send(msg)
		p.conn.SetReadDeadline(time.Now().Add(gap))
		for {
			n, _, err := p.conn.ReadFrom(buf)
			if err != nil {
				break
			}
			if req := string(buf[:n]); strings.HasPrefix(req, method+" ") {
				return req
			}
		}
	}
	p.t.Fatalf("no %s to a 2xx retransmitted for %v", method, 15*sip.T1)
	return ""
}
