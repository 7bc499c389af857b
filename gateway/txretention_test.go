package gateway

import (
	"strings"
	"testing"
	"time"
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
