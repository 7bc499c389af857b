package b2bua

import (
	"strconv"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// sentACK is an ACK as the store sees one after it went out.
func sentACK(t *testing.T, callID string, cseq uint32, toTag string) *sip.Request {
	t.Helper()
	ack := sip.NewRequest(sip.ACK, sip.Uri{Scheme: "sip", User: "1002", Host: "127.0.0.1", Port: 5062})
	ack.AppendHeader(sip.NewHeader("Via", "SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK-"+callID))
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "1001", Host: "127.0.0.1"}, Params: sip.NewParams()}
	from.Params.Add("tag", "ours")
	to := &sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "1002", Host: "127.0.0.1"}, Params: sip.NewParams()}
	to.Params.Add("tag", toTag)
	cid := sip.CallIDHeader(callID)
	ack.AppendHeader(from)
	ack.AppendHeader(to)
	ack.AppendHeader(&cid)
	ack.AppendHeader(&sip.CSeqHeader{SeqNo: cseq, MethodName: sip.ACK})
	ack.SetTransport("UDP")
	ack.SetBody(nil)
	return ack
}

// answer2xx is the 2xx (retransmitted) that ack answered, or another
// response of the same INVITE when status or the To tag differ.
func answer2xx(t *testing.T, ack *sip.Request, status int, toTag string) *sip.Response {
	t.Helper()
	res := sip.NewResponse(status, "OK")
	res.AppendHeader(sip.HeaderClone(ack.From()))
	to := sip.HeaderClone(ack.To()).(*sip.ToHeader)
	to.Params.Add("tag", toTag)
	res.AppendHeader(to)
	res.AppendHeader(sip.HeaderClone(ack.CallID()))
	res.AppendHeader(&sip.CSeqHeader{SeqNo: ack.CSeq().SeqNo, MethodName: sip.INVITE})
	return res
}

func TestAckStore(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newAckStore(func() time.Time { return now })
	ack := sentACK(t, "call-1", 7, "callee")
	want := ack.String()
	s.keep(ack)

	a, m := s.resend(answer2xx(t, ack, 200, "callee"))
	if m != ackAgain || a.msg != want || a.dest != "127.0.0.1:5062" || a.transport != "UDP" {
		t.Fatalf("resend = %+v, %v; want the ACK as sent:\n%s", a, m, want)
	}
	for _, c := range []struct {
		name string
		res  *sip.Response
	}{
		{"a non-2xx", answer2xx(t, ack, 486, "callee")},
		{"another INVITE's 2xx", answer2xx(t, sentACK(t, "call-1", 8, "callee"), 200, "callee")},
		{"another call's 2xx", answer2xx(t, sentACK(t, "call-2", 7, "callee"), 200, "callee")},
	} {
		if _, m := s.resend(c.res); m != noAck {
			t.Errorf("%s got the ACK", c.name)
		}
	}

	// An ACK kept just before the generations turn is kept for
	// (ackGens-1)*ackGen; one kept just after, for ackGens*ackGen.
	now = now.Add(ackGen - time.Nanosecond)
	late := sentACK(t, "call-3", 1, "callee")
	s.keep(late)
	now = now.Add((ackGens-1)*ackGen - time.Nanosecond)
	if _, m := s.resend(answer2xx(t, late, 200, "callee")); m != ackAgain {
		t.Fatalf("ACK gone %v after it was kept", (ackGens-1)*ackGen-time.Nanosecond)
	}
	now = now.Add(2 * time.Nanosecond)
	if _, m := s.resend(answer2xx(t, late, 200, "callee")); m != noAck {
		t.Fatalf("ACK still kept %v after it was kept", (ackGens-1)*ackGen+time.Nanosecond)
	}
	if _, m := s.resend(answer2xx(t, ack, 200, "callee")); m != noAck {
		t.Fatalf("ACK still kept %v after it was kept", ackGens*ackGen)
	}
}

// TestAckStoreResendBound: forged retransmissions get at most ackResends
// ACKs.
func TestAckStoreResendBound(t *testing.T) {
	s := newAckStore(time.Now)
	ack := sentACK(t, "call-1", 1, "callee")
	s.keep(ack)
	n := 0
	for range 3 * ackResends {
		if _, m := s.resend(answer2xx(t, ack, 200, "callee")); m == ackAgain {
			n++
		}
	}
	if n != ackResends {
		t.Fatalf("%d re-sends, want %d", n, ackResends)
	}
}

// TestAckStoreLongSilence: after a pause longer than the window the store
// is empty, and keeps new ACKs again.
func TestAckStoreLongSilence(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newAckStore(func() time.Time { return now })
	old := sentACK(t, "old", 1, "callee")
	s.keep(old)
	now = now.Add(time.Hour + 300*time.Millisecond)
	fresh := sentACK(t, "fresh", 1, "callee")
	s.keep(fresh)
	if _, m := s.resend(answer2xx(t, old, 200, "callee")); m != noAck {
		t.Error("an ACK an hour old was re-sent")
	}
	now = now.Add((ackGens-1)*ackGen - time.Nanosecond)
	if _, m := s.resend(answer2xx(t, fresh, 200, "callee")); m != ackAgain {
		t.Error("the ACK kept after the pause is gone too soon")
	}
}

// TestAckStoreForks: another fork's 2xx to an INVITE we ACKed is ended
// once (newFork, with the winner's way out); its retransmissions then get
// the fork's own ACK, nothing while that is being sent; the winner's ACK
// stays as it was; at most maxForks forks an INVITE.
func TestAckStoreForks(t *testing.T) {
	s := newAckStore(time.Now)
	ack := sentACK(t, "call-1", 7, "callee")
	want := ack.String()
	s.keep(ack)

	a, m := s.resend(answer2xx(t, ack, 200, "fork2"))
	if m != newFork || a.transport != "UDP" || a.toTag != "callee" {
		t.Fatalf("fork's first 2xx: %v %+v; want newFork with the winner's ACK", m, a)
	}
	if a, m := s.resend(answer2xx(t, ack, 200, "fork2")); m != ackAgain || a.msg != "" {
		t.Fatalf("fork's 2xx again before its ACK is kept: %v %q; want ackAgain with nothing to send", m, a.msg)
	}
	forkAck := sentACK(t, "call-1", 7, "fork2")
	s.keep(forkAck)
	if a, m := s.resend(answer2xx(t, ack, 200, "fork2")); m != ackAgain || a.msg != forkAck.String() {
		t.Fatalf("fork's 2xx again: %v\n%s\nwant the fork's ACK:\n%s", m, a.msg, forkAck.String())
	}
	if a, m := s.resend(answer2xx(t, ack, 200, "callee")); m != ackAgain || a.msg != want {
		t.Fatalf("winner's 2xx again: %v\n%s\nwant the winner's ACK:\n%s", m, a.msg, want)
	}
	if _, m := s.resend(answer2xx(t, ack, 200, "")); m != noAck {
		t.Fatalf("2xx without a To tag: %v, want noAck", m)
	}

	forks := 1
	for i := range 2 * maxForks {
		if _, m := s.resend(answer2xx(t, ack, 200, "more"+strconv.Itoa(i))); m == newFork {
			forks++
		}
	}
	if forks != maxForks {
		t.Fatalf("%d forks ended, want %d", forks, maxForks)
	}
}
