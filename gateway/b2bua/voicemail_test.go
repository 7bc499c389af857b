package b2bua

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// boxRouter is planRouter with the box's voicemail for some users.
type boxRouter struct {
	planRouter
	now, onFail map[string]bool
}

func (r boxRouter) BoxVoicemail(ext string) (bool, bool) { return r.now[ext], r.onFail[ext] }

// fakeMailboxes is a voicemail whose lines record what they got; a
// deposit lasts until the caller hangs up or presses #.
type fakeMailboxes struct {
	mu       sync.Mutex
	offers   [][]byte
	local    []netip.Addr
	deposits chan [2]string // mailbox, caller
	digits   chan byte
	counts   map[string][2]int // new, saved by mailbox
}

func newFakeMailboxes() *fakeMailboxes {
	return &fakeMailboxes{deposits: make(chan [2]string, 4), digits: make(chan byte, 8)}
}

func (f *fakeMailboxes) Open(local netip.Addr, offer []byte) (VoicemailLine, []byte, error) {
	f.mu.Lock()
	f.offers, f.local = append(f.offers, offer), append(f.local, local)
	f.mu.Unlock()
	return &fakeLine{f: f}, mkSDP("vm", 7, 1, 30000, ""), nil
}

func (f *fakeMailboxes) Waiting(m string) (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[m][0], f.counts[m][1]
}

func (f *fakeMailboxes) set(m string, n, o int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = map[string][2]int{}
	}
	f.counts[m] = [2]int{n, o}
}

type fakeLine struct {
	f *fakeMailboxes
}

func (l *fakeLine) Deposit(ctx context.Context, mailbox, caller, _ string) {
	l.f.deposits <- [2]string{mailbox, caller}
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-l.f.digits:
			if d == '#' {
				return
			}
		}
	}
}

func (l *fakeLine) Retrieve(ctx context.Context, mailbox string) {
	l.f.deposits <- [2]string{"retrieve", mailbox}
	<-ctx.Done()
}

func (l *fakeLine) RetrieveAny(ctx context.Context) {
	l.f.deposits <- [2]string{"retrieve", ""}
	<-ctx.Done()
}

func (l *fakeLine) Digit(d byte) { l.f.digits <- d }
func (l *fakeLine) Close()       {}

func boxVMEnv(t *testing.T, cfg Config, vm map[string]string, now, onFail map[string]bool, direct bool) (*env, *anchors) {
	t.Helper()
	e := newEnvVM(t, Config{}, vm) // for its plan
	plan := e.b.current().Router.(planRouter)
	m := &anchors{direct: direct}
	cfg.Media = m.media
	cfg.VoicemailAfter = 300 * time.Millisecond
	return newEnvRouter(t, cfg, boxRouter{planRouter: plan, now: now, onFail: onFail}), m
}

// TestBoxVoicemailAnswers: a user with local voicemail and no phone: the
// box answers, the caller's offer goes to the line through a new anchor
// (leg B the box), an INFO digit reaches the line, and the end of the
// deposit hangs the caller up.
func TestBoxVoicemailAnswers(t *testing.T) {
	rec := newCDRs()
	vm := newFakeMailboxes()
	e, m := boxVMEnv(t, Config{Voicemail: vm, OnEnd: rec.on}, nil, map[string]bool{"1002": true}, nil, true)
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("caller got %d %v, want the voicemail's 200", oc.final, oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if d := recvVal(t, vm.deposits, "deposit"); d != [2]string{"1002", "1001"} {
		t.Fatalf("deposit %v", d)
	}
	waitCallState(t, e, StateVoicemail)
	ans := m.all()
	if len(ans) != 1 || !ans[0].box || !strings.Contains(string(vm.offers[0]), "a=x-anchor:offer-A") {
		t.Fatalf("anchors %d, line's offer:\n%s", len(ans), vm.offers)
	}
	if ops, _ := ans[0].snapshot(); strings.Join(ops, ",") != "offer A,answer B" {
		t.Errorf("anchor ops %v", ops)
	}
	if !strings.Contains(string(oc.sess.InviteResponse.Body()), "o=vm 7 1") {
		t.Errorf("caller's answer is not the line's:\n%s", oc.sess.InviteResponse.Body())
	}
	info := sip.NewRequest(sip.INFO, oc.boxOf())
	info.AppendHeader(sip.NewHeader("Content-Type", "application/dtmf-relay"))
	info.SetBody([]byte("Signal=#\r\nDuration=160\r\n"))
	res, err := oc.sess.Do(ctx, info)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("INFO: %v %v", res, err)
	}
	recv(t, a.byes, "the box hangs up after the deposit")
	e.noCalls()
	r := rec.next(t)
	if r.Disposition != Voicemail || r.Target != "1002" || r.ForwardedFrom != "1002" || r.ForwardReason != "unavailable" || r.HangupBy != BySystem {
		t.Errorf("CDR %+v", r)
	}
	if _, closed := ans[0].snapshot(); closed != 1 {
		t.Errorf("anchor closed %d times", closed)
	}
}

// TestBoxVoicemailAfterPilotFails: fallback voicemail: the pilot (over
// the PSTN) fails with 503, the box answers at once; the caller's BYE
// ends the deposit.
func TestBoxVoicemailAfterPilotFails(t *testing.T) {
	rec := newCDRs()
	vm := newFakeMailboxes()
	gw := newPhone(t, "gw", reject(503))
	e, m := boxVMEnv(t, Config{Voicemail: vm, OnEnd: rec.on, PSTNGateways: pstn("udp:" + gw.addr)},
		map[string]string{"1002": "95000"}, nil, map[string]bool{"1002": true}, false)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", reject(486))
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("caller got %d %v", oc.final, oc.err)
	}
	recv(t, gw.invites, "the pilot was tried first")
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recvVal(t, vm.deposits, "deposit")
	// The call's anchor (toward the phone) is re-offered to the line.
	if ans := m.all(); len(ans) != 1 || ans[0].box || !ans[0].boxLeg {
		t.Fatalf("anchors: %d", len(ans))
	} else if ops, _ := ans[0].snapshot(); strings.Join(ops, ",") != "offer A,offer A,answer B" {
		t.Errorf("anchor ops %v", ops)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	e.noCalls()
	if r := rec.next(t); r.Disposition != Voicemail || r.Target != "1002" || r.ForwardReason != "user-busy" || r.HangupBy != ByCaller {
		t.Errorf("CDR %+v", r)
	}
}

// TestInfoOutsideVoicemail: an INFO in an ordinary call is not taken.
func TestInfoDigits(t *testing.T) {
	for body, want := range map[string]byte{"Signal=5\r\nDuration=100": '5', "Signal= #": '#', "signal=11": '#'} {
		if d, ok := infoDigit("application/dtmf-relay", []byte(body)); !ok || d != want {
			t.Errorf("%q: %q %v", body, d, ok)
		}
	}
	if d, ok := infoDigit("application/dtmf", []byte("*")); !ok || d != '*' {
		t.Errorf("application/dtmf: %q %v", d, ok)
	}
	for _, bad := range []string{"Signal=", "Signal=55", "hello", "Signal=\x00"} {
		if _, ok := infoDigit("application/dtmf-relay", []byte(bad)); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, ok := infoDigit("text/plain", []byte("5")); ok {
		t.Error("text/plain accepted")
	}
}

func recvVal[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestMessageSummarySubscription: a phone subscribes to its own mailbox's
// message summary, gets the count at once and at each change; another
// user's mailbox is refused.
func TestMessageSummarySubscription(t *testing.T) {
	vm := newFakeMailboxes()
	vm.set("1001", 0, 2)
	e := newEnvVM(t, Config{Services: newMemServices("1001", "1002"), Voicemail: vm}, nil)
	p := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	if res := p.subscribe(ctx, e.box, "1001", "message-summary", 600, &sub{}); res.StatusCode != 200 {
		t.Fatalf("SUBSCRIBE: %d", res.StatusCode)
	}
	n := recv(t, p.notifies, "first NOTIFY")
	if ct := header(n, "Content-Type"); ct != "application/simple-message-summary" {
		t.Errorf("Content-Type %q", ct)
	}
	if b := string(n.Body()); !strings.Contains(b, "Messages-Waiting: no\r\n") || !strings.Contains(b, "Voice-Message: 0/2\r\n") ||
		!strings.Contains(b, "Message-Account: sip:1001@") {
		t.Errorf("first body:\n%s", b)
	}
	vm.set("1001", 1, 2)
	e.b.MailboxChanged("1001")
	if b := waitNotify(t, p, "Messages-Waiting: yes"); !strings.Contains(b, "Voice-Message: 1/2") {
		t.Errorf("after a message:\n%s", b)
	}
	noNotify := func() {
		select {
		case n := <-p.notifies:
			t.Errorf("unexpected NOTIFY (%s):\n%s", header(n, "Subscription-State"), n.Body())
		case <-time.After(200 * time.Millisecond):
		}
	}
	noNotify() // subscribed: no unsolicited NOTIFY beside the dialog's
	if res := p.subscribe(ctx, e.box, "1002", "message-summary", 600, &sub{}); res.StatusCode != 403 {
		t.Errorf("another user's mailbox: %d, want 403", res.StatusCode)
	}
}

// TestUnsolicitedMWI: a phone that does not subscribe gets the summary
// in a NOTIFY outside a dialog, at a change and when it registers with
// messages waiting.
func TestUnsolicitedMWI(t *testing.T) {
	vm := newFakeMailboxes()
	e := newEnvVM(t, Config{Services: newMemServices("1001"), Voicemail: vm}, nil)
	p := newPhone(t, "1001", nil)
	e.loc.set("1001", p.contact())
	vm.set("1001", 1, 0)
	e.b.MailboxChanged("1001")
	n := recv(t, p.notifies, "unsolicited NOTIFY")
	if header(n, "Event") != "message-summary" || n.To().Params.Has("tag") || !strings.Contains(string(n.Body()), "Voice-Message: 1/0") {
		t.Errorf("NOTIFY:\n%s", n)
	}
	e.b.PhoneRegistered("1001")
	recv(t, p.notifies, "NOTIFY at registration")
	vm.set("1001", 0, 1)
	e.b.PhoneRegistered("1001") // nothing waiting: no NOTIFY
	select {
	case n := <-p.notifies:
		t.Errorf("NOTIFY with nothing new:\n%s", n.Body())
	case <-time.After(200 * time.Millisecond):
	}
}

// TestVoicemailCodes: *97 opens the caller's own mailbox, *98 asks for
// one; the call is the box's (CDR service) until the caller hangs up.
func TestVoicemailCodes(t *testing.T) {
	for code, want := range map[string]string{"*97": "1001", "*98": ""} {
		t.Run(code, func(t *testing.T) {
			rec := newCDRs()
			vm := newFakeMailboxes()
			e, _ := boxVMEnv(t, Config{Voicemail: vm, OnEnd: rec.on}, nil, nil, nil, true)
			a := newPhone(t, "1001", nil)
			ctx := testCtx(t)
			oc := a.dial(ctx, e.box, code, nil)
			if oc.final != 200 {
				t.Fatalf("%s: %d %v", code, oc.final, oc.err)
			}
			if err := oc.sess.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			if d := recvVal(t, vm.deposits, "retrieval"); d != [2]string{"retrieve", want} {
				t.Fatalf("%v", d)
			}
			if err := oc.sess.Bye(ctx); err != nil {
				t.Fatal(err)
			}
			e.noCalls()
			if r := rec.next(t); r.Disposition != Service || r.Target != "1001" || r.Dialled != code {
				t.Errorf("CDR %+v", r)
			}
		})
	}
}

// FuzzInfoDigit: an INFO body is a key or refused, never a crash.
func FuzzInfoDigit(f *testing.F) {
	for _, s := range []string{"Signal=5\r\nDuration=160\r\n", "Signal=#", "signal=11", "*", "Signal=\x00"} {
		f.Add("application/dtmf-relay", s)
	}
	f.Add("application/dtmf", "7")
	f.Fuzz(func(t *testing.T, ct, body string) {
		if d, ok := infoDigit(ct, []byte(body)); ok && !strings.ContainsRune("0123456789*#ABCD", rune(d)) {
			t.Fatalf("digit %q from %q", d, body)
		}
	})
}
