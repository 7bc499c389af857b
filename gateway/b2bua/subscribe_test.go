package b2bua

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// sub is a phone's subscription, for refreshes.
type sub struct {
	callID, fromTag, toTag string
	cseq                   uint32
}

// subscribe sends p's SUBSCRIBE for target's event with expires (in
// dialog s when s.toTag is set) and returns the response.
func (p *phone) subscribe(ctx context.Context, box, target, event string, expires int, s *sub) *sip.Response {
	p.t.Helper()
	host, port, _ := sip.ParseAddr(box)
	req := sip.NewRequest(sip.SUBSCRIBE, sip.Uri{Scheme: "sip", User: target, Host: host, Port: port})
	if s.callID == "" {
		s.callID, s.fromTag = sip.GenerateTagN(16), sip.GenerateTagN(8)
	}
	s.cseq++
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: p.user, Host: p.host}}
	from.Params.Add("tag", s.fromTag)
	to := &sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: target, Host: host}}
	if s.toTag != "" {
		to.Params.Add("tag", s.toTag)
	}
	cid := sip.CallIDHeader(s.callID)
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: s.cseq, MethodName: sip.SUBSCRIBE})
	req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: p.user, Host: p.host, Port: p.port}})
	req.AppendHeader(sip.NewHeader("Event", event))
	req.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(expires)))
	res, err := p.cli.Do(ctx, req)
	if err != nil {
		p.t.Fatalf("SUBSCRIBE: %v", err)
	}
	if res.StatusCode == 200 && s.toTag == "" {
		s.toTag = res.To().Params.GetOr("tag", "")
	}
	return res
}

// nextNotify waits for p's next NOTIFY.
func nextNotify(t *testing.T, p *phone) (state, body string) {
	t.Helper()
	n := recv(t, p.notifies, "NOTIFY at "+p.user)
	return header(n, "Subscription-State"), string(n.Body())
}

// waitNotify waits for a NOTIFY whose body contains want.
func waitNotify(t *testing.T, p *phone, want string) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if _, body := nextNotify(t, p); strings.Contains(body, want) {
			return body
		}
	}
	t.Fatalf("no NOTIFY at %s with %q", p.user, want)
	return ""
}

func subEnv(t *testing.T, sv *memServices) *env {
	if sv == nil {
		sv = newMemServices("1001", "1002", "1003")
	}
	return newEnvVM(t, Config{Services: sv}, nil)
}

// A busy lamp follows 1002's calls: idle, early (ringing), confirmed,
// idle again; the subscription ends with Expires 0.
func TestDialogSubscription(t *testing.T) {
	e := subEnv(t, nil)
	w := newPhone(t, "1001", nil)
	caller := newPhone(t, "1003", nil)
	release := make(chan struct{})
	callee := newPhone(t, "1002", ringUntil(release))
	e.loc.set("1002", callee.contact())
	ctx := testCtx(t)
	var s sub
	res := w.subscribe(ctx, e.box, "1002", "dialog", 600, &s)
	if res.StatusCode != 200 || s.toTag == "" || header(res, "Expires") != "600" {
		t.Fatalf("SUBSCRIBE: %d, Expires %q", res.StatusCode, header(res, "Expires"))
	}
	state, body := nextNotify(t, w)
	if !strings.HasPrefix(state, "active;expires=") || !strings.Contains(body, `entity="sip:1002@`) ||
		!strings.Contains(body, `version="0"`) || strings.Contains(body, "<dialog ") {
		t.Fatalf("first NOTIFY: %s\n%s", state, body)
	}

	done := make(chan *outcall, 1)
	go func() { done <- caller.dial(ctx, e.box, "1002", nil) }()
	body = waitNotify(t, w, "<state>early</state>")
	if !strings.Contains(body, `direction="recipient"`) || !strings.Contains(body, "<identity>1003</identity>") {
		t.Errorf("ringing NOTIFY:\n%s", body)
	}
	close(release)
	oc := <-done
	if oc.final != 200 {
		t.Fatalf("call: %d %v", oc.final, oc.err)
	}
	waitNotify(t, w, "<state>confirmed</state>")
	endCall(t, oc, callee)
	body = waitNotify(t, w, "</dialog-info>")
	for strings.Contains(body, "<dialog ") {
		body = waitNotify(t, w, "</dialog-info>")
	}
	e.noCalls()

	if res := w.subscribe(ctx, e.box, "1002", "dialog", 0, &s); res.StatusCode != 200 {
		t.Fatalf("unsubscribe: %d", res.StatusCode)
	}
	if state, _ := nextNotify(t, w); !strings.HasPrefix(state, "terminated") {
		t.Errorf("last NOTIFY's state %q, want terminated", state)
	}
	if res := w.subscribe(ctx, e.box, "1002", "dialog", 600, &s); res.StatusCode != 481 {
		t.Errorf("refresh after the end: %d, want 481", res.StatusCode)
	}
	e.noCalls()
}

func TestPresenceSubscription(t *testing.T) {
	sv := newMemServices("1001", "1002")
	e := subEnv(t, sv)
	w := newPhone(t, "1001", nil)
	p := newPhone(t, "1002", nil)
	ctx := testCtx(t)
	var s sub
	if res := w.subscribe(ctx, e.box, "1002", "presence", 600, &s); res.StatusCode != 200 {
		t.Fatalf("SUBSCRIBE: %d", res.StatusCode)
	}
	if _, body := nextNotify(t, w); !strings.Contains(body, "<basic>closed</basic>") {
		t.Fatalf("unregistered user's presence:\n%s", body)
	}
	e.loc.set("1002", p.contact())
	e.b.UsersChanged()
	waitNotify(t, w, "<basic>open</basic>")
	sv.put("1002", Services{DND: true})
	e.b.UsersChanged()
	waitNotify(t, w, "<basic>closed</basic>")
	w.subscribe(ctx, e.box, "1002", "presence", 0, &s)
	nextNotify(t, w)
	e.noCalls()
}

func TestSubscribeRefused(t *testing.T) {
	e := subEnv(t, nil)
	w := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	for _, tc := range []struct {
		target, event string
		expires, want int
	}{
		{"1099", "dialog", 600, 404}, // not a local user
		{"1002", "message-summary", 600, 489},
		{"1002", "dialog", 30, 423},
	} {
		if res := w.subscribe(ctx, e.box, tc.target, tc.event, tc.expires, &sub{}); res.StatusCode != tc.want {
			t.Errorf("%s %s expires %d: %d, want %d", tc.target, tc.event, tc.expires, res.StatusCode, tc.want)
		} else if tc.want == 423 && header(res, "Min-Expires") != "60" {
			t.Errorf("423 without Min-Expires 60")
		}
	}
	// A fetch (Expires 0): one NOTIFY with the state, and no subscription.
	if res := w.subscribe(ctx, e.box, "1002", "dialog", 0, &sub{}); res.StatusCode != 200 {
		t.Fatalf("fetch: %d", res.StatusCode)
	}
	if state, body := nextNotify(t, w); !strings.HasPrefix(state, "terminated") || !strings.Contains(body, "dialog-info") {
		t.Errorf("fetch NOTIFY: %s\n%s", state, body)
	}
	// At most maxSubsPerUser subscriptions per subscriber.
	subs := make([]sub, maxSubsPerUser)
	for i := range subs {
		if res := w.subscribe(ctx, e.box, "1002", "dialog", 600, &subs[i]); res.StatusCode != 200 {
			t.Fatalf("subscription %d: %d", i, res.StatusCode)
		}
		nextNotify(t, w)
	}
	if res := w.subscribe(ctx, e.box, "1003", "dialog", 600, &sub{}); res.StatusCode != 403 {
		t.Errorf("subscription %d: %d, want 403", maxSubsPerUser+1, res.StatusCode)
	}
	for i := range subs {
		w.subscribe(ctx, e.box, "1002", "dialog", 0, &subs[i])
		nextNotify(t, w)
	}
	e.noCalls()
}

// BenchmarkWatchedScan is the work of one state change with 1000 calls
// in progress and 500 busy-lamp subscriptions: every user's dialogs
// gathered, then the bodies of the subscriptions to the users that
// changed built.
func BenchmarkWatchedScan(b *testing.B) {
	ua, err := sipgo.NewUA()
	if err != nil {
		b.Fatal(err)
	}
	defer ua.Close()
	box, err := New(ua, Config{}, &fakeLocator{m: map[string][]Contact{}}, planRouter{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		c := &call{b: box}
		c.info = CallInfo{ID: "call-" + strconv.Itoa(i), From: strconv.Itoa(1000 + i), To: strconv.Itoa(3000 + i),
			Target: strconv.Itoa(3000 + i), Route: "local", State: StateAnswered}
		box.calls[c.info.ID] = c
	}
	var subs []*subscription
	for i := range 500 {
		subs = append(subs, &subscription{event: eventDialog, target: strconv.Itoa(1000 + 2*i), entity: "sip:x@box"})
	}
	all, two := map[string]bool{}, map[string]bool{subs[0].target: true, subs[1].target: true}
	for _, s := range subs {
		all[s.target] = true
	}
	b.Run("every-subscription", func(b *testing.B) { // a registration: every lamp looked at
		b.ReportAllocs()
		for b.Loop() {
			dialogs := box.dialogsOf(all)
			for _, s := range subs {
				if box.bodyOf(s, dialogs) == "" {
					b.Fatal("empty body")
				}
			}
		}
	})
	b.Run("one-call", func(b *testing.B) { // a call's state: its two users' lamps
		b.ReportAllocs()
		for b.Loop() {
			dialogs := box.dialogsOf(two)
			for _, s := range subs[:2] {
				if box.bodyOf(s, dialogs) == "" {
					b.Fatal("empty body")
				}
			}
		}
	})
}
