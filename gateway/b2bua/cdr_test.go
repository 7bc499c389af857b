package b2bua

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// vmEnv is a box where 1002 has voicemail at pilot 95000, routed to the
// PSTN gateway gw as 5000.
func vmEnv(t *testing.T, gw *phone, rec *cdrs) *env {
	return newEnvVM(t, Config{PSTNGateways: pstn("udp:" + gw.addr), VoicemailAfter: 300 * time.Millisecond, OnEnd: rec.on},
		map[string]string{"1002": "95000"})
}

// checkPilotInvite checks what the voicemail system got.
func checkPilotInvite(t *testing.T, inv *sip.Request, reason string) {
	t.Helper()
	if inv.Recipient.User != "5000" {
		t.Errorf("pilot's Request-URI user %q, want 5000", inv.Recipient.User)
	}
	div := header(inv, "Diversion")
	if !strings.Contains(div, "<sip:1002@") || !strings.Contains(div, "reason="+reason) || !strings.Contains(div, "counter=1") {
		t.Errorf("Diversion %q, want the extension 1002 with reason=%s", div, reason)
	}
	if inv.From().Address.User != "1001" {
		t.Errorf("pilot's From %s, want the caller", inv.From().Value())
	}
	if string(inv.Body()) != string(sdpA) {
		t.Errorf("pilot got\n%s", inv.Body())
	}
}

func TestVoicemailOnNoAnswer(t *testing.T) {
	rec := newCDRs()
	// The voicemail system answers once the caller has seen 181: sipgo's
	// UAC handles each datagram on its own goroutine, and a 181 processed
	// after the 200 would be dropped by the finished transaction.
	forwarded := make(chan struct{})
	var once sync.Once
	gw := newPhone(t, "gw", ringUntil(forwarded))
	e := vmEnv(t, gw, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	start := time.Now()
	oc := a.dial(ctx, e.box, "1002", func(r *sip.Response) {
		if r.StatusCode == 181 {
			once.Do(func() { close(forwarded) })
		}
	})
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d %v, want the pilot's 200", oc.final, oc.err)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Error("forwarded before VoicemailAfter")
	}
	if !oc.seen(181) {
		t.Error("no 181 Call Is Being Forwarded")
	}
	recv(t, b.cancelled, "CANCEL at the extension")
	checkPilotInvite(t, recv(t, gw.invites, "INVITE at the pilot"), "no-answer")
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, gw.answered, "pilot answered")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, gw.byes, "BYE at the pilot")
	e.noCalls()
	r := rec.next(t)
	if r.Disposition != Voicemail || r.ForwardedFrom != "1002" || r.Dialled != "1002" || r.Target != "5000" ||
		r.Route != dialplan.RoutePSTN || r.Peer != "udp:"+gw.addr || r.Status != 200 || r.HangupBy != ByCaller {
		t.Errorf("CDR %+v", r)
	}
	rec.none(t)
}

func TestVoicemailOnBusy(t *testing.T) {
	rec := newCDRs()
	gw := newPhone(t, "gw", answerNow)
	e := vmEnv(t, gw, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", reject(486))
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v", oc.final, oc.err)
	}
	checkPilotInvite(t, recv(t, gw.invites, "INVITE at the pilot"), "user-busy")
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, gw.answered, "pilot answered")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, gw.byes, "BYE at the pilot")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Voicemail || r.ForwardedFrom != "1002" {
		t.Errorf("CDR %+v", r)
	}
	rec.none(t)
}

func TestVoicemailUnreachable(t *testing.T) {
	rec := newCDRs()
	gw := newPhone(t, "gw", answerNow)
	e := vmEnv(t, gw, rec)
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "1002", nil) // 1002 has no contact
	if oc.final != 200 {
		t.Fatalf("A got %d %v", oc.final, oc.err)
	}
	checkPilotInvite(t, recv(t, gw.invites, "INVITE at the pilot"), "unavailable")
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	d := recv(t, gw.answered, "pilot answered")
	if err := d.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, a.byes, "BYE at A")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Voicemail || r.HangupBy != ByCallee {
		t.Errorf("CDR %+v", r)
	}
}

// TestVoicemailPilotFails: the pilot is busy too; the caller gets the
// extension's own answer (486).
func TestVoicemailPilotFails(t *testing.T) {
	rec := newCDRs()
	gw := newPhone(t, "gw", reject(503))
	e := vmEnv(t, gw, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", reject(486))
	e.loc.set("1002", b.contact())
	if oc := a.dial(testCtx(t), e.box, "1002", nil); oc.final != 486 {
		t.Errorf("A got %d, want 486", oc.final)
	}
	recv(t, gw.invites, "INVITE at the pilot")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Busy || r.Status != 486 {
		t.Errorf("CDR %+v", r)
	}
	rec.none(t)
}

func TestCDRAnsweredCalleeHangsUp(t *testing.T) {
	rec := newCDRs()
	e := newEnv(t, Config{OnEnd: rec.on})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	before := time.Now()
	oc, d := e.call(ctx, a, b, "1002")
	if err := d.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, a.byes, "BYE at A")
	e.noCalls()
	r := rec.next(t)
	if r.CallID != oc.sess.InviteRequest.CallID().Value() || r.Caller != "1001" || r.Dialled != "1002" ||
		r.Target != "1002" || r.Route != dialplan.RouteLocal || r.Rule != "local" || r.Status != 200 ||
		r.Disposition != Answered || r.HangupBy != ByCallee || r.Peer != b.contact().URI {
		t.Errorf("CDR %+v", r)
	}
	if r.Start.Before(before) || r.Answer.Before(r.Start) || r.End.Before(r.Answer) {
		t.Errorf("CDR times start %v answer %v end %v", r.Start, r.Answer, r.End)
	}
	rec.none(t)
}

func TestCDRFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		sc     script
		number string
		cancel bool
		status int
		disp   Disposition
		by     string
	}{
		{name: "busy", sc: reject(486), number: "1002", status: 486, disp: Busy, by: BySystem},
		{name: "cancel", sc: ringForever, number: "1002", cancel: true, status: 487, disp: Cancelled, by: ByCaller},
		{name: "timeout", cfg: Config{RingTimeout: 300 * time.Millisecond}, sc: ringForever, number: "1002", status: 480, disp: NoAnswer, by: BySystem},
		{name: "declined", sc: reject(603), number: "1002", status: 603, disp: Failed, by: BySystem},
		{name: "unknown", number: "5555", status: 404, disp: Failed, by: BySystem},
		{name: "unreachable", number: "1003", status: 480, disp: Unreachable, by: BySystem},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newCDRs()
			tc.cfg.OnEnd = rec.on
			e := newEnv(t, tc.cfg)
			a := newPhone(t, "1001", nil)
			b := newPhone(t, "1002", tc.sc)
			e.loc.set("1002", b.contact())
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			oc := a.dial(ctx, e.box, tc.number, func(r *sip.Response) {
				if tc.cancel && r.StatusCode == 180 {
					cancel()
				}
			})
			if oc.final != tc.status {
				t.Errorf("A got %d, want %d", oc.final, tc.status)
			}
			e.noCalls()
			r := rec.next(t)
			if r.Status != tc.status || r.Disposition != tc.disp || r.HangupBy != tc.by || !r.Answer.IsZero() ||
				r.Caller != "1001" || r.Dialled != tc.number || r.End.Before(r.Start) {
				t.Errorf("CDR %+v", r)
			}
			if tc.number == "1002" && r.Peer != b.contact().URI {
				t.Errorf("CDR peer %q, want %q", r.Peer, b.contact().URI)
			}
			rec.none(t)
		})
	}
}

// TestLoopMarker: an INVITE carrying the loop marker of a live call (our
// own INVITE come back) gets 482.
func TestLoopMarker(t *testing.T) {
	e := newEnv(t, Config{})
	release := make(chan struct{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringUntil(release))
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	done := make(chan *outcall, 1)
	go func() { done <- a.dial(ctx, e.box, "1002", nil) }()
	inv := recv(t, b.invites, "INVITE at B")
	token := header(inv, loopHeader)
	if token == "" {
		t.Fatalf("B-leg INVITE carries no %s", loopHeader)
	}
	// B forwards the INVITE back to the box (a loop through some other B2BUA).
	looped := b.dialWith(ctx, e.box, "1001", []sip.Header{sip.NewHeader(loopHeader, token)}, nil)
	if looped.final != 482 {
		t.Errorf("looped INVITE got %d, want 482", looped.final)
	}
	close(release)
	oc := recv(t, done, "A's call")
	if oc.final != 200 {
		t.Fatalf("A got %d", oc.final)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "B answered")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
	// The call is over: the marker no longer loops.
	if e.b.Looped(inv) {
		t.Error("marker of an ended call still counts as a loop")
	}
}

// TestMergedRequest: the same INVITE (Call-ID, From tag, CSeq) on a second
// branch while the first is being set up gets 482 (RFC 3261 §8.2.2.2).
func TestMergedRequest(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	e.loc.set("1002", b.contact())
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	ringing := make(chan *sip.Response, 1)
	done := make(chan *outcall, 1)
	go func() {
		done <- a.dial(ctx, e.box, "1002", func(r *sip.Response) {
			if r.StatusCode == 180 {
				select {
				case ringing <- r:
				default:
				}
			}
		})
	}()
	r := recv(t, ringing, "180 at A")
	host, port, _ := sip.ParseAddr(e.box)
	dup := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "1002", Host: host, Port: port})
	dup.AppendHeader(sip.HeaderClone(r.From()))
	dup.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "1002", Host: host}})
	dup.AppendHeader(sip.HeaderClone(r.CallID()))
	dup.AppendHeader(sip.HeaderClone(r.CSeq()))
	dup.AppendHeader(sip.NewHeader("Contact", "<sip:1001@"+a.addr+">"))
	res, err := a.cli.Do(ctx, dup)
	if err != nil || res.StatusCode != 482 {
		t.Errorf("merged INVITE: %v %v, want 482", res, err)
	}
	cancel()
	recv(t, done, "A's call")
	recv(t, b.cancelled, "CANCEL at B")
	e.noCalls()
}
