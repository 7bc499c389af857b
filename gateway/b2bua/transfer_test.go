package b2bua

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// answerWith answers with the session of user/sess at port.
func answerWith(user string, sess, port int) script {
	return func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		p.mu.Lock()
		p.sdpUser, p.sdpSess, p.ver = user, sess, sess
		p.mu.Unlock()
		if err := d.Respond(200, "OK", mkSDP(user, sess, sess, port, ""), sip.NewHeader("Content-Type", "application/sdp")); err != nil && !p.ackedInvite(req) {
			p.t.Errorf("%s: 200: %v", p.user, err)
			return
		}
		p.answered <- d
	}
}

// sipfrag is the status line of a NOTIFY's message/sipfrag body.
func sipfrag(t *testing.T, n *sip.Request) string {
	t.Helper()
	if ct := header(n, "Content-Type"); !strings.HasPrefix(ct, "message/sipfrag") {
		t.Errorf("NOTIFY Content-Type %q", ct)
	}
	if ev := header(n, "Event"); !strings.HasPrefix(ev, "refer") {
		t.Errorf("NOTIFY Event %q", ev)
	}
	return strings.TrimSpace(string(n.Body()))
}

func (e *env) referTo(user string) sip.Header {
	return sip.NewHeader("Refer-To", "<sip:"+user+"@"+e.box+">")
}

// TestBlindTransfer: the callee REFERs the caller to 1003. The box
// answers 202, NOTIFYs 100 then 200, calls 1003 from the caller with the
// caller's session, re-INVITEs the caller with 1003's, and hangs up on
// the transferor.
func TestBlindTransfer(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	c := newPhone(t, "1003", answerWith("c", 3, 42000))
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")
	call1 := oc.sess.InviteRequest.CallID().Value()

	res := b.send(ctx, d, boxOfUAS(d), sip.REFER, nil, "", e.referTo("1003"),
		sip.NewHeader("Referred-By", "<sip:1002@127.0.0.1>"))
	if res == nil || res.StatusCode != 202 {
		t.Fatalf("REFER: %v", res)
	}
	n := recv(t, b.notifies, "first NOTIFY")
	if got := sipfrag(t, n); got != "SIP/2.0 100 Trying" {
		t.Errorf("first NOTIFY says %q", got)
	}
	if !strings.HasPrefix(header(n, "Subscription-State"), "active") {
		t.Errorf("first NOTIFY Subscription-State %q", header(n, "Subscription-State"))
	}
	inv := recv(t, c.invites, "INVITE at the transfer target")
	if inv.From().Address.User != "1001" {
		t.Errorf("target's INVITE From %s, want the transferee 1001", inv.From().Value())
	}
	if !strings.Contains(header(inv, "Referred-By"), "sip:1002@") {
		t.Errorf("Referred-By %q", header(inv, "Referred-By"))
	}
	if string(inv.Body()) != string(sdpA) {
		t.Errorf("target got\n%s\nwant the transferee's session\n%s", inv.Body(), sdpA)
	}
	re := recv(t, a.reinvites, "re-INVITE at the transferee")
	body := string(re.Body())
	if !strings.Contains(body, "m=audio 42000 ") {
		t.Errorf("transferee's re-INVITE lacks the target's media:\n%s", body)
	}
	// RFC 3264 §8: the transferee keeps seeing the origin it knows (B's), one version up.
	if !strings.Contains(body, "o=b 2 3 ") {
		t.Errorf("transferee's re-INVITE o= line not continued from B's (o=b 2 2):\n%s", body)
	}
	if n := recv(t, b.notifies, "final NOTIFY"); sipfrag(t, n) != "SIP/2.0 200 OK" ||
		!strings.HasPrefix(header(n, "Subscription-State"), "terminated") {
		t.Errorf("final NOTIFY %q %q", n.Body(), header(n, "Subscription-State"))
	}
	recv(t, b.byes, "BYE at the transferor")
	recv(t, c.acks, "ACK at the target")
	recv(t, a.acks, "ACK of the re-INVITE at the transferee")

	if r := rec.next(t); r.CallID != call1 || r.Disposition != Transferred || r.HangupBy != ByCallee || r.Status != 200 {
		t.Errorf("first call's CDR %+v", r)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, c.byes, "BYE at the target")
	e.noCalls()
	r := rec.next(t)
	if r.Disposition != Answered || r.Caller != "1001" || r.Dialled != "1003" || r.TransferOf != call1 ||
		r.HangupBy != ByCaller || r.Answer.IsZero() || !strings.Contains(r.Peer, c.addr) {
		t.Errorf("transfer bridge CDR %+v", r)
	}
	rec.none(t)
}

// TestBlindTransferBusy: the target is busy; the transferor hears so in
// the final NOTIFY and the original call goes on.
func TestBlindTransferBusy(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	c := newPhone(t, "1003", reject(486))
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")

	if res := b.send(ctx, d, boxOfUAS(d), sip.REFER, nil, "", e.referTo("1003")); res == nil || res.StatusCode != 202 {
		t.Fatalf("REFER: %v", res)
	}
	recv(t, b.notifies, "first NOTIFY")
	if got := sipfrag(t, recv(t, b.notifies, "final NOTIFY")); got != "SIP/2.0 486 Busy Here" {
		t.Errorf("final NOTIFY %q", got)
	}
	if r := rec.next(t); r.Disposition != Busy || r.Status != 486 || r.Dialled != "1003" {
		t.Errorf("failed transfer's CDR %+v", r)
	}
	// Still connected: the transferor's re-INVITE reaches the caller.
	if res := b.send(ctx, d, boxOfUAS(d), sip.INVITE, mkSDP("b", 2, 3, 41000, "sendrecv"), ""); res == nil || res.StatusCode != 200 {
		t.Fatalf("re-INVITE after the failed transfer: %v", res)
	}
	recv(t, a.reinvites, "re-INVITE at A")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Answered || r.HangupBy != ByCaller {
		t.Errorf("call's CDR %+v", r)
	}
	rec.none(t)
}

// TestBlindTransferTransferorLeavesFirst: the transferor hangs up right
// after its REFER (as most phones do); the transferee stays and is
// connected when the target answers.
func TestBlindTransferTransferorLeavesFirst(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{OnEnd: rec.on})
	release := make(chan struct{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	c := newPhone(t, "1003", ringUntil(release))
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")
	if res := b.send(ctx, d, boxOfUAS(d), sip.REFER, nil, "", e.referTo("1003")); res == nil || res.StatusCode != 202 {
		t.Fatalf("REFER: %v", res)
	}
	recv(t, c.invites, "INVITE at the target")
	if err := d.Bye(ctx); err != nil {
		t.Fatalf("transferor's BYE: %v", err)
	}
	if len(a.byes) != 0 {
		t.Fatal("the transferee got a BYE")
	}
	close(release)
	recv(t, c.answered, "target answered")
	recv(t, a.reinvites, "re-INVITE at the transferee")
	if r := rec.next(t); r.Disposition != Transferred {
		t.Errorf("first call's CDR %+v", r)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, c.byes, "BYE at the target")
	e.noCalls()
	rec.next(t)
	rec.none(t)
}

// referReplacing is a Refer-To sending the transferee to target at box
// with Replaces naming the dialog of sess (RFC 3891 §5, escaped).
func referReplacing(box, target string, sess *sipgo.DialogClientSession) sip.Header {
	fromTag, _ := sess.InviteRequest.From().Params.Get("tag")
	toTag, _ := sess.InviteResponse.To().Params.Get("tag")
	rep := url.PathEscape(sess.InviteRequest.CallID().Value() + ";to-tag=" + toTag + ";from-tag=" + fromTag)
	rep = strings.NewReplacer(";", "%3B", "=", "%3D", "@", "%40").Replace(rep)
	return sip.NewHeader("Refer-To", "<sip:"+target+"@"+box+"?Replaces="+rep+">")
}

// TestAttendedTransfer: 1002 talks to the caller 1001, calls 1003, then
// REFERs 1001 to 1003 with Replaces naming the second call: the box
// bridges 1001 and 1003 and hangs up both of 1002's dialogs.
func TestAttendedTransfer(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	x := newPhone(t, "1002", answerNow)
	c := newPhone(t, "1003", answerWith("c", 3, 42000))
	e.loc.set("1002", x.contact())
	e.loc.set("1003", c.contact())
	ctx := testCtx(t)
	oc1, d1 := e.call(ctx, a, x, "1002")
	call1 := oc1.sess.InviteRequest.CallID().Value()
	oc2, _ := e.call(ctx, x, c, "1003") // the consultation call
	call2 := oc2.sess.InviteRequest.CallID().Value()
	cInv := recv(t, c.invites, "INVITE at 1003")
	recv(t, x.invites, "INVITE at 1002")

	refer := referReplacing(e.box, "1003", oc2.sess)
	if res := x.send(ctx, d1, boxOfUAS(d1), sip.REFER, nil, "", refer); res == nil || res.StatusCode != 202 {
		t.Fatalf("REFER: %v", res)
	}
	if got := sipfrag(t, recv(t, x.notifies, "first NOTIFY")); got != "SIP/2.0 100 Trying" {
		t.Errorf("first NOTIFY %q", got)
	}
	re := recv(t, c.reinvites, "re-INVITE at 1003")
	if re.CallID().Value() != cInv.CallID().Value() {
		t.Error("1003's re-INVITE is not in its dialog")
	}
	if !strings.Contains(string(re.Body()), "m=audio 40000 ") || dirOf(re.Body()) != "sendrecv" {
		t.Errorf("1003 did not get the transferee's session:\n%s", re.Body())
	}
	ra := recv(t, a.reinvites, "re-INVITE at 1001")
	if !strings.Contains(string(ra.Body()), "m=audio "+strconv.Itoa(c.mediaPort())+" ") {
		t.Errorf("1001 did not get 1003's session:\n%s", ra.Body())
	}
	if got := sipfrag(t, recv(t, x.notifies, "final NOTIFY")); got != "SIP/2.0 200 OK" {
		t.Errorf("final NOTIFY %q", got)
	}
	recv(t, x.byes, "BYE 1 at the transferor")
	recv(t, x.byes, "BYE 2 at the transferor")
	seen := map[string]Disposition{}
	for range 2 {
		r := rec.next(t)
		seen[r.CallID] = r.Disposition
	}
	if seen[call1] != Transferred || seen[call2] != Transferred {
		t.Errorf("CDRs of the transferor's calls: %v", seen)
	}

	// 1001 and 1003 talk: a hang-up of one reaches the other.
	if err := oc1.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, c.byes, "BYE at 1003")
	e.noCalls()
	if r := rec.next(t); r.Caller != "1001" || r.Dialled != "1003" || r.TransferOf != call1 || r.Disposition != Answered {
		t.Errorf("bridge CDR %+v", r)
	}
	rec.none(t)
}

// TestAttendedTransferReferOvertakesAck: 1002 REFERs before its ACK of
// the consultation call has reached the box (sipgo hands each message to
// its own goroutine, so a REFER sent right after the ACK may be handled
// first). The box waits for that ACK instead of failing the transfer
// with 491; 1002 ACKs only once the box has retransmitted its 2xx, so
// the transfer has surely looked at the consultation call by then.
func TestAttendedTransferReferOvertakesAck(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	x := newPhone(t, "1002", answerNow)
	c := newPhone(t, "1003", answerWith("c", 3, 42000))
	e.loc.set("1002", x.contact())
	e.loc.set("1003", c.contact())
	ctx := testCtx(t)
	oc1, d1 := e.call(ctx, a, x, "1002")
	oc2 := x.dial(ctx, e.box, "1003", nil) // answered, ACK held back
	if oc2.err != nil || oc2.final != 200 {
		t.Fatalf("consultation call: %d %v", oc2.final, oc2.err)
	}
	call2 := oc2.sess.InviteRequest.CallID().Value()
	refer := referReplacing(e.box, "1003", oc2.sess)
	if res := x.send(ctx, d1, boxOfUAS(d1), sip.REFER, nil, "", refer); res == nil || res.StatusCode != 202 {
		t.Fatalf("REFER: %v", res)
	}
	if got := sipfrag(t, recv(t, x.notifies, "first NOTIFY")); got != "SIP/2.0 100 Trying" {
		t.Errorf("first NOTIFY %q", got)
	}
	for {
		r := recv(t, x.strays, "the box's 2xx again")
		if r.CallID().Value() == call2 && r.IsSuccess() {
			break
		}
	}
	select {
	case n := <-x.notifies:
		t.Fatalf("final NOTIFY before the ACK: %q", sipfrag(t, n))
	default:
	}
	if err := oc2.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sipfrag(t, recv(t, x.notifies, "final NOTIFY")); got != "SIP/2.0 200 OK" {
		t.Errorf("final NOTIFY %q", got)
	}
	recv(t, x.byes, "BYE 1 at the transferor")
	recv(t, x.byes, "BYE 2 at the transferor")
	recv(t, c.reinvites, "re-INVITE at 1003")
	recv(t, a.reinvites, "re-INVITE at 1001")
	if err := oc1.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, c.byes, "BYE at 1003")
	e.noCalls()
}

// TestReferUntrustedToPSTN: a PSTN callee may not transfer the caller
// to another PSTN number (toll fraud); it gets 403 in the NOTIFY.
func TestReferUntrustedToPSTN(t *testing.T) {
	gw := newPhone(t, "gw", answerNow)
	e := newEnv(t, Config{PSTNGateways: pstn("udp:" + gw.addr)})
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, gw, "90441234567")
	if res := gw.send(ctx, d, boxOfUAS(d), sip.REFER, nil, "", e.referTo("90999")); res == nil || res.StatusCode != 202 {
		t.Fatalf("REFER: %v", res)
	}
	recv(t, gw.notifies, "first NOTIFY")
	if got := sipfrag(t, recv(t, gw.notifies, "final NOTIFY")); got != "SIP/2.0 403 Forbidden" {
		t.Errorf("final NOTIFY %q", got)
	}
	if len(gw.invites) != 1 {
		t.Errorf("gateway got %d INVITEs, want only the call", len(gw.invites))
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, gw.byes, "BYE at the gateway")
	e.noCalls()
}

// TestInviteWithReplaces: another phone of the callee's user (1002's
// second device) takes over the callee's place with INVITE + Replaces
// (RFC 3891): the caller is re-INVITEd with its session, the replaced
// phone gets a BYE. A stranger (1004) naming the same dialog is refused
// with 403 first (RFC 3891 §6: only a participant may replace it) and the
// call is untouched.
func TestInviteWithReplaces(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	w := newPhone(t, "1002", nil) // the same user's other phone
	stranger := newPhone(t, "1004", nil)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	_, d := e.call(ctx, a, b, "1002")
	// B's dialog with the box, as B would hand it to the new phone.
	bTag, _ := d.InviteResponse.To().Params.Get("tag")
	boxTag, _ := d.InviteRequest.From().Params.Get("tag")
	rep := d.InviteRequest.CallID().Value() + ";to-tag=" + bTag + ";from-tag=" + boxTag
	if o := stranger.dialWith(ctx, e.box, "1002", []sip.Header{sip.NewHeader("Replaces", rep)}, nil); o.final != 403 {
		t.Fatalf("INVITE with Replaces from a stranger: %d %v, want 403", o.final, o.err)
	}
	if len(a.reinvites) != 0 || len(b.byes) != 0 {
		t.Fatal("a refused replacement touched the call")
	}
	ow := w.dialWith(ctx, e.box, "1002", []sip.Header{sip.NewHeader("Replaces", rep)}, nil)
	if ow.err != nil || ow.final != 200 {
		t.Fatalf("INVITE with Replaces: %d %v", ow.final, ow.err)
	}
	if err := ow.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	re := recv(t, a.reinvites, "re-INVITE at A")
	if !strings.Contains(string(re.Body()), "m=audio 40000 ") {
		t.Errorf("A did not get the new phone's session:\n%s", re.Body())
	}
	if dirOf(ow.sess.InviteResponse.Body()) != "sendrecv" || !strings.Contains(string(ow.sess.InviteResponse.Body()), "m=audio "+strconv.Itoa(a.mediaPort())) {
		t.Errorf("the new phone did not get A's answer:\n%s", ow.sess.InviteResponse.Body())
	}
	recv(t, b.byes, "BYE at the replaced phone")
	if len(b.invites) != 1 {
		t.Error("the replaced phone was called again")
	}
	if err := ow.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, a.byes, "BYE at A")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Answered || r.HangupBy != ByCallee {
		t.Errorf("CDR %+v", r)
	}
	rec.none(t)
	// A Replaces naming no dialog of ours is refused.
	if o := w.dialWith(ctx, e.box, "1002", []sip.Header{sip.NewHeader("Replaces", "nosuch;to-tag=a;from-tag=b")}, nil); o.final != 481 {
		t.Errorf("unknown Replaces: %d, want 481", o.final)
	}
	e.noCalls()
}

// TestReferReplacesStranger: 1002, in a call with 1001, REFERs 1001 with
// Replaces naming a dialog of a call it is no party of (1003 talking to
// 1004). That would hijack the other call (1001 bridged to 1004, 1003 hung
// up): the REFER's dialog shares no participant with the named one, so the
// transfer fails with 403 and both calls go on.
func TestReferReplacesStranger(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	x := newPhone(t, "1002", answerNow)
	v1 := newPhone(t, "1003", nil)
	v2 := newPhone(t, "1004", answerNow)
	e.loc.set("1002", x.contact())
	e.loc.set("1004", v2.contact())
	ctx := testCtx(t)
	oc1, d1 := e.call(ctx, a, x, "1002")
	oc2, _ := e.call(ctx, v1, v2, "1004") // the victims' call
	call2 := oc2.sess.InviteRequest.CallID().Value()
	fromTag, _ := oc2.sess.InviteRequest.From().Params.Get("tag")
	toTag, _ := oc2.sess.InviteResponse.To().Params.Get("tag")
	rep := strings.NewReplacer(";", "%3B", "=", "%3D", "@", "%40").Replace(call2 + ";to-tag=" + toTag + ";from-tag=" + fromTag)
	refer := sip.NewHeader("Refer-To", "<sip:1004@"+e.box+"?Replaces="+rep+">")
	if res := x.send(ctx, d1, boxOfUAS(d1), sip.REFER, nil, "", refer); res == nil || res.StatusCode != 202 {
		t.Fatalf("REFER: %v", res)
	}
	recv(t, x.notifies, "first NOTIFY")
	if got := sipfrag(t, recv(t, x.notifies, "final NOTIFY")); got != "SIP/2.0 403 Forbidden" {
		t.Errorf("final NOTIFY %q, want 403", got)
	}
	if len(v2.reinvites) != 0 || len(v1.byes) != 0 || len(a.reinvites) != 0 {
		t.Error("a refused transfer touched the calls")
	}
	// Both calls go on: each hang-up reaches its own partner.
	if err := oc2.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, v2.byes, "BYE at 1004")
	if err := oc1.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, x.byes, "BYE at 1002")
	e.noCalls()
}
