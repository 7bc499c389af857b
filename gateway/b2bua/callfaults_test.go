package b2bua

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// ringMany sends n 180s (an HQ ring group forking to n phones), then
// runs next.
func ringMany(n int, next script) script {
	return func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		for range n {
			respondOrFail(p, d, 180, nil)
		}
		next(p, d, req)
	}
}

// TestManyProvisionalsThenAnswer: a B leg that sends more provisional
// responses than sipgo's WaitAnswer takes (11) is still waited for; its
// 2xx is the call's answer and is ACKed.
func TestManyProvisionalsThenAnswer(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	// B answers once A has seen every 180: the 2xx would otherwise
	// overtake the last ones (sipgo handles each message on a goroutine
	// of its own).
	release := make(chan struct{})
	b := newPhone(t, "1002", ringMany(14, func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		select {
		case <-release:
		case <-time.After(wait):
		}
		answerNow(p, d, req)
	}))
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	rang := 0
	oc := a.dial(ctx, e.box, "1002", func(r *sip.Response) {
		if r.StatusCode == 180 {
			if rang++; rang == 14 {
				close(release)
			}
		}
	})
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200", oc.final, oc.err)
	}
	if rang != 14 {
		t.Errorf("A got %d 180s, want the callee's 14", rang)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "answer at B")
	recv(t, b.acks, "ACK at B")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestManyProvisionalsThenRingTimeout: a B leg abandoned after many
// provisional responses (the ring timeout here) gets its CANCEL.
func TestManyProvisionalsThenRingTimeout(t *testing.T) {
	e := newEnv(t, Config{RingTimeout: time.Second})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringMany(14, ringForever))
	e.loc.set("1002", b.contact())
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 480 {
		t.Errorf("A got %d (%v), want 480 after the ring timeout", oc.final, oc.err)
	}
	if cause := recv(t, b.cancelled, "CANCEL at B"); !errors.Is(cause, sip.ErrTransactionCanceled) {
		t.Errorf("B ended with %v, want a CANCEL", cause)
	}
	e.noCalls()
}

// TestReinvite2xxRetransmissionReAcked: RFC 3261 §13.2.2.4 — the
// callee retransmits its 2xx to a relayed re-INVITE (our ACK was lost);
// each retransmission gets the ACK again, with the same CSeq.
func TestReinvite2xxRetransmissionReAcked(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, _ := e.call(ctx, a, b, "1002")

	again := make(chan struct{})
	b.mu.Lock()
	b.resend2xx = again
	b.mu.Unlock()
	res := a.send(ctx, oc.sess, oc.boxOf(), sip.INVITE, mkSDP("a", 1, 2, 40000, "sendonly"), "")
	if res == nil || res.StatusCode != 200 {
		t.Fatalf("hold: %v", res)
	}
	re := recv(t, b.reinvites, "re-INVITE at B")
	ack1 := recv(t, b.acks, "ACK of the re-INVITE at B")
	close(again)
	ack2 := recv(t, b.acks, "ACK of the retransmitted 2xx at B")
	if ack1.CSeq().SeqNo != re.CSeq().SeqNo || ack2.CSeq().SeqNo != re.CSeq().SeqNo {
		t.Errorf("ACK CSeqs %d, %d; want the re-INVITE's %d", ack1.CSeq().SeqNo, ack2.CSeq().SeqNo, re.CSeq().SeqNo)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestSecondReinviteWhilePending: RFC 3261 §14.2 — a party's second
// re-INVITE while its first is still unanswered gets 500 with
// Retry-After; the first then completes (glare across both parties stays
// 491: TestReinviteGlare).
func TestSecondReinviteWhilePending(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, _ := e.call(ctx, a, b, "1002")

	release := make(chan struct{})
	b.mu.Lock()
	b.onReinvite = func(p *phone, req *sip.Request) (int, []byte) {
		<-release
		return answerMirror(p, req)
	}
	b.mu.Unlock()
	done := make(chan *sip.Response, 1)
	go func() { done <- a.send(ctx, oc.sess, oc.boxOf(), sip.INVITE, mkSDP("a", 1, 2, 40000, "sendonly"), "") }()
	recv(t, b.reinvites, "re-INVITE at B")
	res := a.send(ctx, oc.sess, oc.boxOf(), sip.INVITE, mkSDP("a", 1, 3, 40000, "sendrecv"), "")
	if res == nil || res.StatusCode != 500 || header(res, "Retry-After") == "" {
		t.Errorf("second re-INVITE: A got %v, want 500 with Retry-After", res)
	}
	close(release)
	if res := recv(t, done, "A's first re-INVITE"); res == nil || res.StatusCode != 200 {
		t.Errorf("first re-INVITE ended with %v", res)
	}
	recv(t, b.acks, "ACK of the re-INVITE at B")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestCallToPhoneLeavesFromItsListener: the INVITE to a registered phone
// leaves from the listener its REGISTER arrived on (Contact.Local), not
// from the one the caller used or one LocalFor picks: a phone behind NAT
// only lets in what comes from the address it registered to.
func TestCallToPhoneLeavesFromItsListener(t *testing.T) {
	var other *sip.Addr
	e := newEnv(t, Config{LocalFor: func(string) *sip.Addr { return other }})
	second := e.listen()
	host, port, _ := sip.ParseAddr(e.box)
	other = &sip.Addr{IP: net.ParseIP(host), Port: port} // what load or routing would pick
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	ct := b.contact()
	ct.Local = second
	e.loc.set("1002", ct)
	ctx := testCtx(t)
	oc, _ := e.call(ctx, a, b, "1002")
	inv := recv(t, b.invites, "INVITE at B")
	if inv.Source() != second {
		t.Errorf("INVITE to B came from %s, want its registration's listener %s", inv.Source(), second)
	}
	if got := inv.Contact().Address.HostPort(); got != second {
		t.Errorf("INVITE to B has Contact %s, want %s", got, second)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	bye := recv(t, b.byes, "BYE at B")
	if bye.Source() != second {
		t.Errorf("BYE to B came from %s, want %s", bye.Source(), second)
	}
	e.noCalls()
}

// TestLateOfferEarlyMedia: with a late offer (an INVITE without SDP) the
// callee's SDP in a 183 is its offer; it is rewritten through the Anchor
// like any other description before it reaches the caller.
func TestLateOfferEarlyMedia(t *testing.T) {
	m := &anchors{}
	e := newEnv(t, Config{Media: m.media})
	a := newPhone(t, "1001", nil)
	release := make(chan struct{}) // A saw the 183
	b := newPhone(t, "1002", func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		respondOrFail(p, d, 183, sdpB)
		select {
		case <-release:
		case <-time.After(wait):
		}
		answerNow(p, d, req)
	})
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	host, port, _ := sip.ParseAddr(e.box)
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "1002", Host: host, Port: port})
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "1001", Host: "127.0.0.1"}}
	from.Params.Add("tag", sip.GenerateTagN(10))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "1002", Host: host}})
	sess, err := a.dcc.WriteInvite(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var early []byte
	if err := waitAnswer(ctx, sess, func(r *sip.Response) {
		if r.StatusCode == 183 && early == nil {
			early = r.Body()
			close(release)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(early), "a=x-anchor:offer-B") {
		t.Errorf("183 to A not rewritten by the Anchor:\n%s", early)
	}
	if !strings.Contains(string(sess.InviteResponse.Body()), "a=x-anchor:offer-B") {
		t.Errorf("2xx to A not rewritten by the Anchor:\n%s", sess.InviteResponse.Body())
	}
	ack := sip.NewRequest(sip.ACK, *sess.InviteResponse.Contact().Address.Clone())
	ack.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	ack.SetBody(sdpA)
	if err := sess.WriteAck(ctx, ack); err != nil {
		t.Fatal(err)
	}
	recv(t, b.acks, "ACK at B")
	recv(t, b.answered, "B confirmed")
	if err := sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// rawUAS is a SIP endpoint on a bare UDP socket: it answers only what a
// test tells it to (sipgo's server would send 100 Trying at once).
type rawUAS struct {
	t    *testing.T
	conn net.PacketConn
	addr string
}

func newRawUAS(t *testing.T) *rawUAS {
	conn := listenUDP(t)
	t.Cleanup(func() { _ = conn.Close() })
	return &rawUAS{t: t, conn: conn, addr: conn.LocalAddr().String()}
}

// next reads the next request with method m, skipping others
// (retransmissions).
func (u *rawUAS) next(m sip.RequestMethod) (*sip.Request, net.Addr) {
	u.t.Helper()
	buf := make([]byte, 65536)
	deadline := time.Now().Add(wait)
	for {
		_ = u.conn.SetReadDeadline(deadline)
		n, from, err := u.conn.ReadFrom(buf)
		if err != nil {
			u.t.Fatalf("raw UAS: no %s: %v", m, err)
		}
		msg, err := sip.ParseMessage(append([]byte(nil), buf[:n]...))
		if err != nil {
			continue
		}
		if req, ok := msg.(*sip.Request); ok && req.Method == m {
			return req, from
		}
	}
}

// respond answers req with code; toTag is the dialog's tag.
func (u *rawUAS) respond(req *sip.Request, to net.Addr, code int, toTag string) {
	u.t.Helper()
	res := sip.NewResponseFromRequest(req, code, "", nil)
	if h := res.To(); h != nil && toTag != "" {
		h.Params = sip.NewParams()
		h.Params.Add("tag", toTag)
	}
	if code >= 200 && code < 300 && req.Method == sip.INVITE {
		res.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "gw", Host: "127.0.0.1", Port: u.conn.LocalAddr().(*net.UDPAddr).Port}})
		res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
		res.SetBody(sdpB)
	}
	if _, err := u.conn.WriteTo([]byte(res.String()), to); err != nil {
		u.t.Fatal(err)
	}
}

// TestLateAnswerAfterAttemptTimeout: a gateway dropped for silence
// (AttemptTimeout: not even 100 Trying) that answers anyway, once the
// call went elsewhere, is ACKed and sent a BYE; one that starts ringing
// gets a CANCEL.
func TestLateAnswerAfterAttemptTimeout(t *testing.T) {
	for _, answers := range []bool{true, false} {
		t.Run(map[bool]string{true: "answers", false: "rings"}[answers], func(t *testing.T) {
			gw1 := newRawUAS(t)
			gw2 := newPhone(t, "gw2", reject(486))
			e := newEnv(t, Config{
				PSTNGateways:   pstn("udp:"+gw1.addr, "udp:"+gw2.addr),
				AttemptTimeout: 300 * time.Millisecond,
			})
			a := newPhone(t, "1001", nil)
			oc := a.dial(testCtx(t), e.box, "90441234567", nil)
			if oc.final != 486 {
				t.Errorf("A got %d (%v), want gateway 2's 486", oc.final, oc.err)
			}
			inv, from := gw1.next(sip.INVITE)
			if answers {
				gw1.respond(inv, from, 200, "late")
				ack, _ := gw1.next(sip.ACK)
				if ack.CSeq().SeqNo != inv.CSeq().SeqNo {
					t.Errorf("ACK CSeq %d, want %d", ack.CSeq().SeqNo, inv.CSeq().SeqNo)
				}
				bye, from := gw1.next(sip.BYE)
				gw1.respond(bye, from, 200, "")
			} else {
				gw1.respond(inv, from, 180, "late")
				cancel, from := gw1.next(sip.CANCEL)
				gw1.respond(cancel, from, 200, "")
				gw1.respond(inv, from, 487, "late")
			}
			e.noCalls()
		})
	}
}

// TestSessionIntervalTooSmall: a callee (an SBC in front of a gateway)
// that refuses the INVITE with 422 and Min-SE (RFC 4028 §7.4) is called
// again with Session-Expires and Min-SE at that value (above the box's
// default 1800 s); the call goes up.
func TestSessionIntervalTooSmall(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		if header(req, "Session-Expires") != "3600" {
			if err := d.Respond(422, "Session Interval Too Small", nil, sip.NewHeader("Min-SE", "3600")); err != nil {
				p.t.Errorf("422: %v", err)
			}
			return
		}
		answerNow(p, d, req)
	})
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, _ := e.call(ctx, a, b, "1002")
	recv(t, b.invites, "first INVITE at B")
	again := recv(t, b.invites, "INVITE after the 422 at B")
	if se, min := header(again, "Session-Expires"), header(again, "Min-SE"); se != "3600" || min != "3600" {
		t.Errorf("retry has Session-Expires %q, Min-SE %q; want 3600, 3600", se, min)
	}
	if n := len(again.GetHeaders("Session-Expires")); n != 1 {
		t.Errorf("retry has %d Session-Expires headers, want 1", n)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

func TestRetryMinSE(t *testing.T) {
	res := func(code int, minSE string) error {
		r := sip.NewResponse(code, "")
		if minSE != "" {
			r.AppendHeader(sip.NewHeader("Min-SE", minSE))
		}
		return &sipgo.ErrDialogResponse{Res: r}
	}
	for _, tc := range []struct {
		err   error
		tried int
		want  int
	}{
		{res(422, "1800"), 0, 1800},
		{res(422, " 600 ;x=y"), 0, 600},
		{res(422, "1800"), 1800, 0}, // already tried: no loop
		{res(422, ""), 0, 0},
		{res(422, "30"), 0, 0}, // below RFC 4028's 90 s floor
		{res(486, "1800"), 0, 0},
		{errors.New("timeout"), 0, 0},
	} {
		if got := retryMinSE(tc.err, tc.tried); got != tc.want {
			t.Errorf("retryMinSE(%v, %d) = %d, want %d", tc.err, tc.tried, got, tc.want)
		}
	}
}
