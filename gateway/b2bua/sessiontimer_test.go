package b2bua

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// shortSessions makes one second of Session-Expires last unit for the
// test: a session of 90 s (the RFC 4028 minimum, which the headers still
// say) then runs in 90 units.
func shortSessions(t *testing.T, unit time.Duration) {
	t.Helper()
	sessionUnit.Store(int64(unit))
	t.Cleanup(func() { sessionUnit.Store(0) })
}

// refreshAt waits for a session refresh (re-INVITE or UPDATE) at phone p.
func refreshAt(t *testing.T, p *phone) *sip.Request {
	t.Helper()
	select {
	case r := <-p.reinvites:
		return r
	case r := <-p.updates:
		return r
	case <-time.After(wait):
		t.Fatalf("no session refresh at %s", p.user)
		return nil
	}
}

// TestSessionTimerBoxRefreshes: RFC 4028 — the caller asks the box to
// refresh (refresher=uas) and the callee keeps no timer (its 2xx has no
// Session-Expires): the box refreshes both dialogs at half the interval,
// with Session-Expires naming itself the refresher; the callee was asked
// for the caller's interval and Min-SE, and the call stays up.
func TestSessionTimerBoxRefreshes(t *testing.T) {
	shortSessions(t, 10*time.Millisecond)
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc := a.dialWith(ctx, e.box, "1002", []sip.Header{
		sip.NewHeader("Supported", "timer"), sip.NewHeader("Session-Expires", "90;refresher=uas"), sip.NewHeader("Min-SE", "90"),
	}, nil)
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200", oc.final, oc.err)
	}
	res := oc.sess.InviteResponse
	if se := header(res, "Session-Expires"); se != "90;refresher=uas" {
		t.Errorf("2xx to A has Session-Expires %q, want 90;refresher=uas", se)
	}
	if !supports(res, "timer") || !hasOption(res, "timer", "Require") {
		t.Errorf("2xx to A lacks Require: timer: %q", header(res, "Require"))
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	inv := recv(t, b.invites, "INVITE at B")
	if se, min := header(inv, "Session-Expires"), header(inv, "Min-SE"); se != "90" || min != "90" {
		t.Errorf("INVITE to B has Session-Expires %q, Min-SE %q; want 90, 90", se, min)
	}
	if !hasOption(inv, "timer", "Supported") {
		t.Errorf("INVITE to B lacks Supported: timer: %q", header(inv, "Supported"))
	}
	recv(t, b.answered, "answer at B")
	recv(t, b.acks, "ACK at B")

	for i := range 2 {
		r := refreshAt(t, b)
		if se := header(r, "Session-Expires"); se != "90;refresher=uac" {
			t.Errorf("refresh %d at B has Session-Expires %q, want 90;refresher=uac", i, se)
		}
	}
	r := refreshAt(t, a)
	if se := header(r, "Session-Expires"); se != "90;refresher=uac" {
		t.Errorf("refresh at A has Session-Expires %q, want 90;refresher=uac", se)
	}
	if n := len(e.b.Calls()); n != 1 {
		t.Fatalf("%d calls after the refreshes, want the call still up", n)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestSessionExpiresWithoutRefresh: RFC 4028 §10 — the caller is the
// refresher (refresher=uac) and never refreshes: before the session
// expires the box ends the call with a BYE on both legs (CDR: dead).
func TestSessionExpiresWithoutRefresh(t *testing.T) {
	shortSessions(t, 10*time.Millisecond)
	cd := newCDRs()
	e := newEnv(t, Config{OnEnd: cd.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc := a.dialWith(ctx, e.box, "1002", []sip.Header{
		sip.NewHeader("Supported", "timer"), sip.NewHeader("Session-Expires", "90;refresher=uac"),
	}, nil)
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200", oc.final, oc.err)
	}
	if se := header(oc.sess.InviteResponse, "Session-Expires"); se != "90;refresher=uac" {
		t.Errorf("2xx to A has Session-Expires %q, want 90;refresher=uac", se)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "answer at B")
	recv(t, b.byes, "BYE at B when the session expired")
	recv(t, a.byes, "BYE at A when the session expired")
	if r := cd.next(t); r.Disposition != Dead || r.HangupBy != BySystem {
		t.Errorf("CDR %s by %s, want dead by system", r.Disposition, r.HangupBy)
	}
	e.noCalls()
}

// TestSessionTimerCalleeRefreshes: the callee chooses to refresh
// (refresher=uas in its 2xx) and does, by UPDATE: the box answers each
// refresh with Session-Expires naming the callee and keeps the call up
// past the interval; it sends the callee no refresh of its own.
func TestSessionTimerCalleeRefreshes(t *testing.T) {
	const unit = 30 * time.Millisecond
	shortSessions(t, unit)
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		p.answeredWithB()
		if err := d.Respond(200, "OK", sdpB, sip.NewHeader("Content-Type", "application/sdp"),
			sip.NewHeader("Session-Expires", "90;refresher=uas"), sip.NewHeader("Require", "timer")); err != nil {
			p.t.Errorf("200: %v", err)
			return
		}
		p.answered <- d
	})
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")
	for i := range 5 { // five refreshes span more than the 90-unit interval
		// The callee's own refresh period (RFC 4028 §10: before the
		// session expires; the box would end it 60 units after the
		// last, which leaves 40 units of margin on a loaded machine).
		time.Sleep(20 * unit)
		res := b.send(ctx, d, boxOfUAS(d), sip.UPDATE, nil, "", sip.NewHeader("Session-Expires", "90;refresher=uac"), sip.NewHeader("Supported", "timer"))
		if res == nil || res.StatusCode != 200 {
			t.Fatalf("refresh %d: %v", i, res)
		}
		if se := header(res, "Session-Expires"); se != "90;refresher=uac" {
			t.Errorf("2xx to B's refresh has Session-Expires %q, want 90;refresher=uac", se)
		}
	}
	select {
	case r := <-b.reinvites:
		t.Errorf("box refreshed the callee, which is the refresher: %s", r.StartLine())
	case r := <-b.updates:
		t.Errorf("box refreshed the callee, which is the refresher: %s", r.StartLine())
	default:
	}
	if n := len(e.b.Calls()); n != 1 {
		t.Fatalf("%d calls, want the call still up", n)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestSessionIntervalBelowMinSE: a caller's Session-Expires below 90 s
// gets 422 with Min-SE: 90 (RFC 4028 §9); nobody is called.
func TestSessionIntervalBelowMinSE(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	oc := a.dialWith(testCtx(t), e.box, "1002", []sip.Header{sip.NewHeader("Session-Expires", "60")}, nil)
	if oc.final != 422 {
		t.Fatalf("A got %d (%v), want 422", oc.final, oc.err)
	}
	var de *sipgo.ErrDialogResponse
	if ok := errors.As(oc.err, &de); !ok || header(de.Res, "Min-SE") != "90" {
		t.Errorf("422 without Min-SE: 90: %v", oc.err)
	}
	select {
	case r := <-b.invites:
		t.Errorf("B was called: %s", r.StartLine())
	default:
	}
	e.noCalls()
}

func TestSessionExpiresHeader(t *testing.T) {
	for _, tc := range []struct {
		v    string
		n    int
		ref  string
		good bool
	}{
		{"1800", 1800, "", true},
		{"90;refresher=uac", 90, "uac", true},
		{" 120 ; refresher = UAS ;x=1", 120, "uas", true},
		{"999999999", maxSessionExpires, "", true},
		{"", 0, "", false},
		{"abc;refresher=uac", 0, "", false},
		{"-5", 0, "", false},
	} {
		r := sip.NewResponse(200, "OK")
		r.AppendHeader(sip.NewHeader("Session-Expires", tc.v))
		n, ref, ok := sessionExpires(r)
		if n != tc.n || ref != tc.ref || ok != tc.good {
			t.Errorf("%q: %d %q %v, want %d %q %v", tc.v, n, ref, ok, tc.n, tc.ref, tc.good)
		}
	}
}

// FuzzSessionHeaders: the readers of Session-Expires, Min-SE, RSeq and
// RAck never panic and keep their bounds on any header value.
func FuzzSessionHeaders(f *testing.F) {
	for _, s := range []string{"1800", "90;refresher=uac", " 120 ; refresher = UAS ;x=1", "1 2 INVITE", "4294967296 1 INVITE", "", ";;;=", "-1", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := sip.NewResponse(183, "Session Progress")
		for _, name := range []string{"Session-Expires", "Min-SE", "RSeq", "RAck", "Require", "Supported"} {
			r.AppendHeader(sip.NewHeader(name, v))
		}
		if n, ref, ok := sessionExpires(r); ok && (n <= 0 || n > maxSessionExpires || ref != strings.ToLower(ref)) {
			t.Errorf("Session-Expires %q read as %d %q", v, n, ref)
		}
		if n := minSEOf(r); n < 0 || n > maxSessionExpires {
			t.Errorf("Min-SE %q read as %d", v, n)
		}
		if n, ok := rseqOf(r); ok && n == 0 {
			t.Errorf("RSeq %q read as 0", v)
		}
		if _, _, m, ok := parseRAck(v); ok && m != strings.ToUpper(m) {
			t.Errorf("RAck %q method %q", v, m)
		}
	})
}

// TestSessionIntervalEndToEnd: the caller's Session-Expires and Min-SE
// reach the callee; the callee's shorter interval (its 2xx) is the
// caller's too, with the caller, which supports timers and named no
// refresher, as its refresher.
func TestSessionIntervalEndToEnd(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		p.answeredWithB()
		if err := d.Respond(200, "OK", sdpB, sip.NewHeader("Content-Type", "application/sdp"),
			sip.NewHeader("Session-Expires", "900;refresher=uac"), sip.NewHeader("Require", "timer")); err != nil {
			p.t.Errorf("200: %v", err)
			return
		}
		p.answered <- d
	})
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc := a.dialWith(ctx, e.box, "1002", []sip.Header{
		sip.NewHeader("Supported", "timer"), sip.NewHeader("Session-Expires", "1800"), sip.NewHeader("Min-SE", "600"),
	}, nil)
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200", oc.final, oc.err)
	}
	inv := recv(t, b.invites, "INVITE at B")
	if se, min := header(inv, "Session-Expires"), header(inv, "Min-SE"); se != "1800" || min != "600" {
		t.Errorf("INVITE to B has Session-Expires %q, Min-SE %q; want 1800, 600", se, min)
	}
	if se := header(oc.sess.InviteResponse, "Session-Expires"); se != "900;refresher=uac" {
		t.Errorf("2xx to A has Session-Expires %q, want 900;refresher=uac", se)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "answer at B")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}
