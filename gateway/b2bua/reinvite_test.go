package b2bua

import (
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/siptarget"
)

// TestHoldAndResumeBothDirections: the caller holds (a=sendonly), resumes
// (a=sendrecv), then the callee holds (a=inactive); each re-INVITE reaches
// the other phone on its own dialog with the offer unchanged, and the
// other phone's answer comes back.
func TestHoldAndResumeBothDirections(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")
	bInv := recv(t, b.invites, "INVITE at B")

	// The caller holds.
	hold := mkSDP("a", 1, 2, 40000, "sendonly")
	res := a.send(ctx, oc.sess, oc.boxOf(), sip.INVITE, hold, "")
	if res == nil || res.StatusCode != 200 {
		t.Fatalf("hold: %v", res)
	}
	if got := dirOf(res.Body()); got != "recvonly" {
		t.Errorf("caller's 200 says %q, want B's recvonly answer:\n%s", got, res.Body())
	}
	if !strings.Contains(string(res.Body()), "o=b 2 3 ") {
		t.Errorf("caller's 200 is not B's answer:\n%s", res.Body())
	}
	if res.Contact() == nil {
		t.Error("2xx to re-INVITE without Contact")
	}
	re := recv(t, b.reinvites, "re-INVITE at B")
	if string(re.Body()) != string(hold) {
		t.Errorf("B got offer\n%s\nwant the caller's, untouched\n%s", re.Body(), hold)
	}
	if re.CallID().Value() != bInv.CallID().Value() {
		t.Error("re-INVITE to B is not in B's dialog (Call-ID)")
	}
	if tag, _ := re.From().Params.Get("tag"); tag != mustTag(t, bInv.From()) {
		t.Error("re-INVITE to B has a From tag other than the dialog's")
	}
	if re.CSeq().SeqNo <= bInv.CSeq().SeqNo {
		t.Errorf("re-INVITE CSeq %d not above the INVITE's %d", re.CSeq().SeqNo, bInv.CSeq().SeqNo)
	}
	if re.Recipient.User != "1002" || re.Recipient.Port != b.port {
		t.Errorf("re-INVITE Request-URI %s, want B's Contact", re.Recipient.String())
	}
	ack := recv(t, b.acks, "ACK of the re-INVITE at B")
	if ack.CSeq().SeqNo != re.CSeq().SeqNo {
		t.Errorf("B's ACK CSeq %d, want the re-INVITE's %d", ack.CSeq().SeqNo, re.CSeq().SeqNo)
	}

	// The caller resumes.
	res = a.send(ctx, oc.sess, oc.boxOf(), sip.INVITE, mkSDP("a", 1, 3, 40000, "sendrecv"), "")
	if res == nil || res.StatusCode != 200 || dirOf(res.Body()) != "sendrecv" {
		t.Fatalf("resume: %v", res)
	}
	if re := recv(t, b.reinvites, "resume at B"); dirOf(re.Body()) != "sendrecv" {
		t.Errorf("B got %q on resume", dirOf(re.Body()))
	}
	recv(t, b.acks, "ACK of the resume at B")

	// The callee puts the call on hold the other way.
	res = b.send(ctx, d, boxOfUAS(d), sip.INVITE, mkSDP("b", 2, 3, 41000, "inactive"), "")
	if res == nil || res.StatusCode != 200 || dirOf(res.Body()) != "inactive" {
		t.Fatalf("callee's hold: %v", res)
	}
	re = recv(t, a.reinvites, "re-INVITE at A")
	if dirOf(re.Body()) != "inactive" || !strings.Contains(string(re.Body()), "o=b 2 3 ") {
		t.Errorf("A got\n%s", re.Body())
	}
	if re.CallID().Value() != oc.sess.InviteRequest.CallID().Value() {
		t.Error("re-INVITE to A is not in A's dialog")
	}
	recv(t, a.acks, "ACK of the re-INVITE at A")

	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Answered || r.HangupBy != ByCaller || r.Status != 200 {
		t.Errorf("CDR %+v", r)
	}
	rec.none(t)
}

func mustTag(t *testing.T, h interface{ Value() string }) string {
	t.Helper()
	v := h.Value()
	i := strings.Index(v, "tag=")
	if i < 0 {
		t.Fatalf("no tag in %s", v)
	}
	v = v[i+4:]
	if j := strings.IndexAny(v, ";>"); j >= 0 {
		v = v[:j]
	}
	return v
}

// TestReinviteGlare: while the callee is answering a relayed re-INVITE,
// its own re-INVITE gets 491 (RFC 3261 §14.1); the first exchange then
// completes.
func TestReinviteGlare(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")

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
	res := b.send(ctx, d, boxOfUAS(d), sip.INVITE, mkSDP("b", 2, 3, 41000, "sendonly"), "")
	if res == nil || res.StatusCode != 491 {
		t.Errorf("glare: B got %v, want 491", res)
	}
	close(release)
	if res := recv(t, done, "A's re-INVITE"); res == nil || res.StatusCode != 200 {
		t.Errorf("A's re-INVITE ended with %v", res)
	}
	if len(a.reinvites) != 0 {
		t.Error("B's refused re-INVITE reached A")
	}
	recv(t, b.acks, "ACK at B")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestReinviteErrors: unknown dialog 481, a body that is not SDP 488, a
// refusal by the other party relayed as is.
func TestReinviteErrors(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, _ := e.call(ctx, a, b, "1002")

	res := a.send(ctx, oc.sess, oc.boxOf(), sip.INVITE, []byte("hello"), "text/plain")
	if res == nil || res.StatusCode != 488 || header(res, "Accept") != "application/sdp" {
		t.Errorf("non-SDP re-INVITE: %v", res)
	}

	b.mu.Lock()
	b.onReinvite = func(*phone, *sip.Request) (int, []byte) { return 488, nil }
	b.mu.Unlock()
	res = a.send(ctx, oc.sess, oc.boxOf(), sip.INVITE, mkSDP("a", 1, 2, 40000, "sendonly"), "")
	if res == nil || res.StatusCode != 488 {
		t.Errorf("refused re-INVITE: A got %v, want B's 488", res)
	}
	recv(t, b.reinvites, "re-INVITE at B")

	// A dialog the box never had.
	host, port, _ := sip.ParseAddr(e.box)
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "1002", Host: host, Port: port})
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "1001", Host: "127.0.0.1"}}
	from.Params.Add("tag", "nosuchfrom")
	to := &sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "1002", Host: host}}
	to.Params.Add("tag", "nosuchto")
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(sip.NewHeader("Contact", "<sip:1001@"+a.addr+">"))
	if res, err := a.cli.Do(ctx, req); err != nil || res.StatusCode != 481 {
		t.Errorf("unknown dialog: %v %v, want 481", res, err)
	}

	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestUpdateRelayed: an UPDATE with an offer is relayed (RFC 3311); one
// without a body is answered by the box alone.
func TestUpdateRelayed(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, _ := e.call(ctx, a, b, "1002")

	res := a.send(ctx, oc.sess, oc.boxOf(), sip.UPDATE, mkSDP("a", 1, 2, 40000, "sendonly"), "")
	if res == nil || res.StatusCode != 200 || dirOf(res.Body()) != "recvonly" {
		t.Fatalf("UPDATE: %v", res)
	}
	up := recv(t, b.updates, "UPDATE at B")
	if dirOf(up.Body()) != "sendonly" {
		t.Errorf("B's UPDATE says %q", dirOf(up.Body()))
	}
	if res := a.send(ctx, oc.sess, oc.boxOf(), sip.UPDATE, nil, ""); res == nil || res.StatusCode != 200 {
		t.Errorf("refresh UPDATE: %v", res)
	}
	select {
	case r := <-b.updates:
		t.Errorf("a refresh UPDATE reached B: %s", r.StartLine())
	default:
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestMediaAnchorSeesEveryExchange: with Config.Media every SDP passes
// through the Anchor (initial offer and answer, a re-INVITE each way) and
// it is closed once when the call ends.
func TestMediaAnchorSeesEveryExchange(t *testing.T) {
	m := &anchors{}
	e := newEnv(t, Config{Media: m.media})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")
	inv := recv(t, b.invites, "INVITE at B")
	if !strings.Contains(string(inv.Body()), "a=x-anchor:offer-A") {
		t.Errorf("B's offer did not pass the anchor:\n%s", inv.Body())
	}
	if !strings.Contains(string(oc.sess.InviteResponse.Body()), "a=x-anchor:answer-B") {
		t.Errorf("A's answer did not pass the anchor:\n%s", oc.sess.InviteResponse.Body())
	}
	res := b.send(ctx, d, boxOfUAS(d), sip.INVITE, mkSDP("b", 2, 3, 41000, "sendonly"), "")
	if res == nil || !strings.Contains(string(res.Body()), "a=x-anchor:answer-A") {
		t.Fatalf("B's re-INVITE answer: %v", res)
	}
	if re := recv(t, a.reinvites, "re-INVITE at A"); !strings.Contains(string(re.Body()), "a=x-anchor:offer-B") {
		t.Errorf("A's re-INVITE did not pass the anchor:\n%s", re.Body())
	}
	recv(t, a.acks, "ACK at A")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
	all := m.all()
	if len(all) != 1 {
		t.Fatalf("%d anchors, want 1", len(all))
	}
	ops, closed := all[0].snapshot()
	want := "offer A,answer B,offer B,answer A"
	if strings.Join(ops, ",") != want || closed != 1 {
		t.Errorf("anchor saw %v closed %d times, want %s and 1", ops, closed, want)
	}
	if !all[0].a.IsLoopback() || !all[0].b.IsLoopback() {
		t.Errorf("anchor local addresses %v %v", all[0].a, all[0].b)
	}
	// The MediaFunc knows who is on each leg: the two local users.
	if want := [2]End{{Route: dialplan.RouteLocal, Name: "1001"}, {Route: dialplan.RouteLocal, Name: "1002"}}; all[0].ends != want {
		t.Errorf("bridge ends %+v, want %+v", all[0].ends, want)
	}
}

// The called leg's end by route: a local user, HQ, the first PSTN gateway.
func TestEndOf(t *testing.T) {
	gw := siptarget.MustParse("udp:198.18.3.2:5060", siptarget.UDP)
	s := &Settings{gateways: []siptarget.Target{gw}}
	for _, c := range []struct {
		d    dialplan.Decision
		want End
	}{
		{dialplan.Decision{Route: dialplan.RouteLocal, Target: "1002"}, End{Route: dialplan.RouteLocal, Name: "1002"}},
		{dialplan.Decision{Route: dialplan.RouteHQ, Target: "2001"}, End{Route: dialplan.RouteHQ}},
		{dialplan.Decision{Route: dialplan.RoutePSTN, Target: "+78435550000"}, End{Route: dialplan.RoutePSTN, Name: "udp:198.18.3.2:5060"}},
	} {
		if got := s.endOf(c.d); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.d.Route, got, c.want)
		}
	}
	if got := (&Settings{}).endOf(dialplan.Decision{Route: dialplan.RoutePSTN}); got != (End{Route: dialplan.RoutePSTN}) {
		t.Errorf("PSTN with no gateway: %+v", got)
	}
}

// TestMediaRefusedIs488: a factory error or an offer the anchor refuses
// answers the INVITE with 488 and no callee is called.
func TestMediaRefusedIs488(t *testing.T) {
	for _, m := range []*anchors{{refuse: true}, {offerr: true}} {
		rec := newCDRs()
		e := newEnv(t, Config{Media: m.media, OnEnd: rec.on})
		a := newPhone(t, "1001", nil)
		b := newPhone(t, "1002", answerNow)
		e.loc.set("1002", b.contact())
		if oc := a.dial(testCtx(t), e.box, "1002", nil); oc.final != 488 {
			t.Errorf("A got %d, want 488", oc.final)
		}
		if len(b.invites) != 0 {
			t.Error("the callee was called")
		}
		e.noCalls()
		if r := rec.next(t); r.Status != 488 || r.Disposition != Failed {
			t.Errorf("CDR %+v", r)
		}
		for _, f := range m.all() {
			if _, closed := f.snapshot(); closed != 1 {
				t.Errorf("anchor closed %d times", closed)
			}
		}
	}
}

// TestMediaDeadEndsCall: the anchor's onDead ends the call (BYE to both)
// with disposition media-timeout.
func TestMediaDeadEndsCall(t *testing.T) {
	m := &anchors{}
	rec := newCDRs()
	e := newEnv(t, Config{Media: m.media, OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	e.call(testCtx(t), a, b, "1002")
	m.all()[0].onDead("no RTP for 30 s")
	recv(t, a.byes, "BYE at A")
	recv(t, b.byes, "BYE at B")
	e.noCalls()
	if r := rec.next(t); r.Disposition != MediaTimeout || r.HangupBy != BySystem {
		t.Errorf("CDR %+v", r)
	}
}

// TestKeepAliveEndsDeadCall: the callee answers the in-dialog OPTIONS
// with 481 (it lost the call): the caller gets a BYE and the CDR says dead.
func TestKeepAliveEndsDeadCall(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{KeepAlive: 200 * time.Millisecond, OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	e.call(testCtx(t), a, b, "1002")
	// Both legs are probed while they answer.
	opt := recv(t, a.options, "OPTIONS at A")
	recv(t, b.options, "OPTIONS at B")
	if opt.To() == nil || !opt.To().Params.Has("tag") {
		t.Error("keep-alive OPTIONS is not in-dialog")
	}
	if len(a.byes) != 0 || len(b.byes) != 0 {
		t.Fatal("a healthy call was ended")
	}
	b.optionsCode.Store(481)
	recv(t, a.byes, "BYE at A")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Dead || r.HangupBy != BySystem || r.Answer.IsZero() {
		t.Errorf("CDR %+v", r)
	}
}

// TestKeepAliveNoResponse: a callee that stops answering at all is dead
// too.
func TestKeepAliveNoResponse(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{KeepAlive: 300 * time.Millisecond, OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	e.call(testCtx(t), a, b, "1002")
	b.optionsCode.Store(0)
	recv(t, a.byes, "BYE at A")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Dead {
		t.Errorf("CDR %+v", r)
	}
}

// TestInDialogOptions: the box answers an in-dialog OPTIONS for a live
// dialog with 200 and for an unknown one with 481.
func TestInDialogOptions(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, _ := e.call(ctx, a, b, "1002")
	if res := a.send(ctx, oc.sess, oc.boxOf(), sip.OPTIONS, nil, ""); res == nil || res.StatusCode != 200 {
		t.Errorf("in-dialog OPTIONS: %v", res)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
	if res := a.send(ctx, oc.sess, oc.boxOf(), sip.OPTIONS, nil, ""); res == nil || res.StatusCode != 481 {
		t.Errorf("OPTIONS after the call: %v, want 481", res)
	}
}

// TestOfferlessReinvite: a re-INVITE without SDP reaches the other party
// without SDP; its offer comes back in the 2xx and the sender's answer,
// carried by its ACK, goes on in the ACK to the other party.
func TestOfferlessReinvite(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, _ := e.call(ctx, a, b, "1002")

	res, err := oc.sess.Do(ctx, sip.NewRequest(sip.INVITE, oc.boxOf()))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("offerless re-INVITE: %v %v", res, err)
	}
	re := recv(t, b.reinvites, "re-INVITE at B")
	if len(re.Body()) != 0 {
		t.Errorf("B's re-INVITE carries an offer:\n%s", re.Body())
	}
	if !strings.Contains(string(res.Body()), "o=b 2 3 ") {
		t.Errorf("A did not get B's offer:\n%s", res.Body())
	}
	answer := mkSDP("a", 1, 2, 40000, "")
	ack := sip.NewRequest(sip.ACK, oc.boxOf())
	ack.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	ack.SetBody(answer)
	if err := oc.sess.WriteRequest(ack); err != nil {
		t.Fatal(err)
	}
	bAck := recv(t, b.acks, "ACK at B")
	if string(bAck.Body()) != string(answer) || bAck.CSeq().SeqNo != re.CSeq().SeqNo {
		t.Errorf("B's ACK (CSeq %d, re-INVITE %d) carries\n%s\nwant A's answer", bAck.CSeq().SeqNo, re.CSeq().SeqNo, bAck.Body())
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestLateOfferCall: an INVITE without SDP reaches the callee without
// SDP; the callee's offer is relayed in the 2xx and the caller's answer in
// its ACK goes on in the callee's ACK.
func TestLateOfferCall(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
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
	if err := sess.WaitAnswer(ctx, sipgo.AnswerOptions{}); err != nil {
		t.Fatal(err)
	}
	if inv := recv(t, b.invites, "INVITE at B"); len(inv.Body()) != 0 {
		t.Errorf("B got an offer:\n%s", inv.Body())
	}
	if string(sess.InviteResponse.Body()) != string(sdpB) {
		t.Errorf("A's 2xx does not carry B's offer:\n%s", sess.InviteResponse.Body())
	}
	ack := sip.NewRequest(sip.ACK, *sess.InviteResponse.Contact().Address.Clone())
	ack.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	ack.SetBody(sdpA)
	if err := sess.WriteAck(ctx, ack); err != nil {
		t.Fatal(err)
	}
	if bAck := recv(t, b.acks, "ACK at B"); string(bAck.Body()) != string(sdpA) {
		t.Errorf("B's ACK carries\n%s\nwant A's answer", bAck.Body())
	}
	recv(t, b.answered, "B confirmed")
	if err := sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}
