package b2bua

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// memServices is a ServiceStore in memory; the users are its keys.
type memServices struct {
	mu sync.Mutex
	m  map[string]Services
}

func newMemServices(users ...string) *memServices {
	s := &memServices{m: map[string]Services{}}
	for _, u := range users {
		s.m[u] = Services{}
	}
	return s
}

func (s *memServices) Services(ext string) Services {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[ext]
}

func (s *memServices) IsUser(ext string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[ext]
	return ok
}

func (s *memServices) put(ext string, sv Services) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[ext] = sv
}

func (s *memServices) SetService(ext string, ch ServiceChange) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, ok := s.m[ext]
	if !ok {
		return ErrNotLocal
	}
	switch ch.Feature {
	case FeatureDND:
		sv.DND = ch.On
	case FeatureForwardAlways:
		sv.ForwardAlways = ch.Number
	case FeatureForwardBusy:
		sv.ForwardBusy = ch.Number
	case FeatureForwardNoAnswer:
		sv.ForwardNoAnswer = ch.Number
	}
	s.m[ext] = sv
	return nil
}

// servicesEnv is a box with users 1001-1004 and a PSTN gateway gw (the
// dial plan's 9 prefix, stripped).
func servicesEnv(t *testing.T, gw *phone, sv *memServices, rec *cdrs) *env {
	cfg := Config{Services: sv, OnEnd: rec.on, VoicemailAfter: 300 * time.Millisecond}
	if gw != nil {
		cfg.PSTNGateways = pstn("udp:" + gw.addr)
	}
	return newEnvVM(t, cfg, nil)
}

// diversions are the Diversion values of an INVITE, top first.
func diversions(inv *sip.Request) []string {
	var out []string
	for _, h := range inv.GetHeaders("Diversion") {
		out = append(out, h.Value())
	}
	return out
}

// hangUp ends an answered outcall from the caller, waits for the
// callee's BYE, and for the box to have no call left.
func hangUp(t *testing.T, e *env, oc *outcall, callee *phone) {
	t.Helper()
	endCall(t, oc, callee)
	e.noCalls()
}

// endCall ACKs an answered outcall, hangs it up and waits for the
// callee's BYE.
func endCall(t *testing.T, oc *outcall, callee *phone) {
	t.Helper()
	ctx := testCtx(t)
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, callee.answered, "callee answered")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, callee.byes, "BYE at the callee")
}

func TestForwardAlwaysRingsTheForwardOnly(t *testing.T) {
	rec := newCDRs()
	sv := newMemServices("1001", "1002", "1003")
	sv.put("1002", Services{ForwardAlways: "1003"})
	e := servicesEnv(t, nil, sv, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	c := newPhone(t, "1003", answerNow)
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v, want 1003's 200", oc.final, oc.err)
	}
	inv := recv(t, c.invites, "INVITE at 1003")
	if d := diversions(inv); len(d) != 1 || !strings.Contains(d[0], "<sip:1002@") || !strings.Contains(d[0], "reason=unconditional") || !strings.Contains(d[0], "counter=1") {
		t.Errorf("Diversion %q, want 1002 unconditional", d)
	}
	if !oc.seen(181) {
		t.Error("no 181 Call Is Being Forwarded")
	}
	hangUp(t, e, oc, c)
	select {
	case <-b.invites:
		t.Error("1002 rang although it forwards always")
	default:
	}
	r := rec.next(t)
	if r.Disposition != Answered || r.ForwardedFrom != "1002" || r.ForwardReason != "unconditional" || r.Target != "1003" {
		t.Errorf("CDR %+v", r)
	}
}

func TestDoNotDisturbGoesToTheBusyForward(t *testing.T) {
	rec := newCDRs()
	gw := newPhone(t, "gw", answerNow)
	sv := newMemServices("1001", "1002")
	sv.put("1002", Services{DND: true, ForwardBusy: "95551234"})
	e := servicesEnv(t, gw, sv, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v, want the gateway's 200", oc.final, oc.err)
	}
	inv := recv(t, gw.invites, "INVITE at the PSTN gateway")
	if inv.Recipient.User != "5551234" {
		t.Errorf("gateway's Request-URI user %q, want 5551234 (the dial plan's translation)", inv.Recipient.User)
	}
	if d := diversions(inv); len(d) != 1 || !strings.Contains(d[0], "reason=do-not-disturb") {
		t.Errorf("Diversion %q, want do-not-disturb", d)
	}
	hangUp(t, e, oc, gw)
	select {
	case <-b.invites:
		t.Error("a phone in do-not-disturb rang")
	default:
	}
	if r := rec.next(t); r.Route != dialplan.RoutePSTN || r.ForwardedFrom != "1002" {
		t.Errorf("CDR %+v", r)
	}
}

func TestDoNotDisturbAloneIsBusy(t *testing.T) {
	rec := newCDRs()
	sv := newMemServices("1001", "1002")
	sv.put("1002", Services{DND: true})
	e := servicesEnv(t, nil, sv, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	if oc := a.dial(testCtx(t), e.box, "1002", nil); oc.final != 486 {
		t.Fatalf("A got %d %v, want 486", oc.final, oc.err)
	}
	e.noCalls()
	if r := rec.next(t); r.Disposition != Busy {
		t.Errorf("CDR %+v", r)
	}
}

func TestForwardNoAnswerAfterItsRingTime(t *testing.T) {
	rec := newCDRs()
	sv := newMemServices("1001", "1002", "1003")
	sv.put("1002", Services{ForwardNoAnswer: "1003", NoAnswerAfter: 200 * time.Millisecond})
	e := servicesEnv(t, nil, sv, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	c := newPhone(t, "1003", answerNow)
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	start := time.Now()
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v, want 1003's 200", oc.final, oc.err)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Error("forwarded before the no-answer time")
	}
	recv(t, b.cancelled, "CANCEL at 1002")
	if d := diversions(recv(t, c.invites, "INVITE at 1003")); len(d) != 1 || !strings.Contains(d[0], "reason=no-answer") {
		t.Errorf("Diversion %q, want no-answer", d)
	}
	hangUp(t, e, oc, c)
	rec.next(t)
}

// A busy forward that comes back is cut with 482; each phone rang once.
func TestForwardLoopIsCut(t *testing.T) {
	rec := newCDRs()
	sv := newMemServices("1001", "1002", "1003")
	sv.put("1002", Services{ForwardBusy: "1003"})
	sv.put("1003", Services{ForwardBusy: "1002"})
	e := servicesEnv(t, nil, sv, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", reject(486))
	c := newPhone(t, "1003", reject(486))
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	if oc := a.dial(testCtx(t), e.box, "1002", nil); oc.final != 482 {
		t.Fatalf("A got %d %v, want 482", oc.final, oc.err)
	}
	e.noCalls()
	recv(t, b.invites, "INVITE at 1002")
	d := diversions(recv(t, c.invites, "INVITE at 1003"))
	if len(d) != 1 || !strings.Contains(d[0], "reason=user-busy") {
		t.Errorf("Diversion at 1003 %q", d)
	}
	for _, p := range []*phone{b, c} {
		select {
		case <-p.invites:
			t.Errorf("%s rang twice in one call", p.user)
		default:
		}
	}
	rec.next(t)
}

// A forward-always chain carries one Diversion per forward, latest first.
func TestForwardChainStacksDiversions(t *testing.T) {
	rec := newCDRs()
	sv := newMemServices("1001", "1002", "1003", "1004")
	sv.put("1002", Services{ForwardAlways: "1003"})
	sv.put("1003", Services{ForwardAlways: "1004"})
	e := servicesEnv(t, nil, sv, rec)
	a := newPhone(t, "1001", nil)
	d4 := newPhone(t, "1004", answerNow)
	e.loc.set("1004", d4.contact())
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v", oc.final, oc.err)
	}
	d := diversions(recv(t, d4.invites, "INVITE at 1004"))
	if len(d) != 2 || !strings.Contains(d[0], "<sip:1003@") || !strings.Contains(d[0], "counter=2") || !strings.Contains(d[1], "<sip:1002@") {
		t.Errorf("Diversion %q, want 1003 (counter=2) over 1002", d)
	}
	hangUp(t, e, oc, d4)
	rec.next(t)
}

// The feature codes change the caller's own services; each is answered
// and then hung up by the box, or refused with a status that says why.
func TestFeatureCodes(t *testing.T) {
	rec := newCDRs()
	sv := newMemServices("1001", "1002")
	e := servicesEnv(t, nil, sv, rec)
	a := newPhone(t, "1001", nil)
	stranger := newPhone(t, "7777", nil)
	ctx := testCtx(t)

	served := func(code string, check func(Services) bool) {
		t.Helper()
		oc := a.dial(ctx, e.box, code, nil)
		if oc.final != 200 {
			t.Fatalf("%s: got %d %v, want 200", code, oc.final, oc.err)
		}
		if body := string(oc.sess.InviteResponse.Body()); !strings.Contains(body, "a=inactive") || !strings.Contains(body, "m=audio 9 RTP/AVP 0") {
			t.Errorf("%s: answer\n%s\nwant the offered PCMU stream inactive", code, body)
		}
		if err := oc.sess.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		recv(t, a.byes, code+": the box's BYE")
		e.noCalls()
		if !check(sv.Services("1001")) {
			t.Errorf("%s: services now %+v", code, sv.Services("1001"))
		}
		if r := rec.next(t); r.Disposition != Service || r.Status != 200 {
			t.Errorf("%s: CDR %+v", code, r)
		}
	}
	refused := func(p *phone, code string, want int) {
		t.Helper()
		if oc := p.dial(ctx, e.box, code, nil); oc.final != want {
			t.Errorf("%s: got %d %v, want %d", code, oc.final, oc.err, want)
		}
		e.noCalls()
		rec.next(t)
	}

	served("*78", func(s Services) bool { return s.DND })
	served("*79", func(s Services) bool { return !s.DND })
	served("*721002", func(s Services) bool { return s.ForwardAlways == "1002" })
	served("*73", func(s Services) bool { return s.ForwardAlways == "" })
	served("*9095551234", func(s Services) bool { return s.ForwardBusy == "95551234" })
	served("*921002", func(s Services) bool { return s.ForwardNoAnswer == "1002" && s.ForwardBusy == "95551234" })
	served("*93", func(s Services) bool { return s.ForwardNoAnswer == "" })
	served("*91", func(s Services) bool { return s == Services{} })

	refused(a, "*72", 484)        // no number
	refused(a, "*721001", 482)    // to itself
	refused(a, "*72555", 404)     // no route in the dial plan
	refused(stranger, "*78", 403) // not a local user
	if sv.Services("1001") != (Services{}) {
		t.Errorf("a refused code changed the services: %+v", sv.Services("1001"))
	}
}
