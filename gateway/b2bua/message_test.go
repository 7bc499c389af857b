package b2bua

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// sendMessage sends a MESSAGE from p to number through the box and
// returns the answer.
func (p *phone) sendMessage(e *env, number, ctype string, body []byte) *sip.Response {
	p.t.Helper()
	req := sip.NewRequest(sip.MESSAGE, sip.Uri{Scheme: "sip", User: number, Host: "127.0.0.1"})
	req.SetDestination(e.box)
	from := &sip.FromHeader{DisplayName: "Anna", Address: sip.Uri{Scheme: "sip", User: p.user, Host: p.host}}
	from.Params.Add("tag", sip.GenerateTagN(8))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: number, Host: "127.0.0.1"}})
	callID := sip.CallIDHeader(sip.GenerateTagN(16))
	req.AppendHeader(&callID)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: 1, MethodName: sip.MESSAGE})
	ct := sip.ContentTypeHeader(ctype)
	req.AppendHeader(&ct)
	req.SetBody(body)
	res, err := p.cli.Do(testCtx(p.t), req)
	if err != nil {
		p.t.Fatalf("MESSAGE to %s: %v", number, err)
	}
	return res
}

// A message reaches every registered contact of its addressee; the first
// 2xx answers the sender, a contact's failure does not.
func TestMessageToEveryContact(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	desk, mobile := newPhone(t, "1002", nil), newPhone(t, "1002", nil)
	desk.messageCode.Store(486)
	e.loc.set("1002", desk.contact(), mobile.contact())
	body := []byte("lunch at one?")
	if res := a.sendMessage(e, "1002", "text/plain;charset=UTF-8", body); res.StatusCode != 200 {
		t.Fatalf("message answered %d, want 200", res.StatusCode)
	}
	for _, p := range []*phone{desk, mobile} {
		m := recv(t, p.messages, "MESSAGE at a contact of 1002")
		if string(m.Body()) != string(body) || !strings.HasPrefix(header(m, "Content-Type"), "text/plain") || m.From().Address.User != "1001" || m.From().DisplayName != "Anna" {
			t.Errorf("relayed message: From %v, Content-Type %q, body %q", m.From(), header(m, "Content-Type"), m.Body())
		}
	}
	// Every contact refusing: the sender gets their answer.
	mobile.messageCode.Store(486)
	if res := a.sendMessage(e, "1002", "text/plain", body); res.StatusCode != 486 {
		t.Errorf("every contact busy: %d, want 486", res.StatusCode)
	}
	e.noCalls()
}

// What a message cannot be: for nobody registered, for the PSTN, with no
// route, of another type, too large.
func TestMessageRefusals(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	for _, c := range []struct {
		name, number, ctype string
		body                []byte
		want                int
	}{
		{"addressee not registered", "1003", "text/plain", []byte("hi"), 480},
		{"to the PSTN", "95551234", "text/plain", []byte("hi"), 480},
		{"no route", "777", "text/plain", []byte("hi"), 404},
		{"an image", "1003", "image/png", []byte("\x89PNG"), 415},
		{"a page too long", "1003", "text/plain", []byte(strings.Repeat("x", MaxMessageBytes+1)), 413},
		{"CPIM is passed", "1003", "message/cpim", []byte("From: <sip:1001@b>\r\n\r\nContent-Type: text/plain\r\n\r\nhi"), 480},
	} {
		res := a.sendMessage(e, c.number, c.ctype, c.body)
		if res.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, res.StatusCode, c.want)
		}
		if c.want == 415 && header(res, "Accept") != messageTypes {
			t.Errorf("%s: Accept %q", c.name, header(res, "Accept"))
		}
	}
	e.noCalls()
}

// A sender gets a burst of messages, then one a second: the next is 503
// with Retry-After, until time refills its budget. Another sender has
// its own.
func TestMessageRateLimit(t *testing.T) {
	e := newEnv(t, Config{})
	now := time.Now()
	var mu sync.Mutex
	e.b.msgs.mu.Lock()
	e.b.msgs.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e.b.msgs.mu.Unlock()
	a, c := newPhone(t, "1001", nil), newPhone(t, "1003", nil)
	b := newPhone(t, "1002", nil)
	e.loc.set("1002", b.contact())
	for i := range messageBurst {
		if res := a.sendMessage(e, "1002", "text/plain", []byte("ping")); res.StatusCode != 200 {
			t.Fatalf("message %d of the burst: %d", i+1, res.StatusCode)
		}
		recv(t, b.messages, "MESSAGE at 1002")
	}
	res := a.sendMessage(e, "1002", "text/plain", []byte("one too many"))
	if res.StatusCode != 503 || header(res, "Retry-After") == "" {
		t.Fatalf("past the burst: %d Retry-After %q, want 503 with Retry-After", res.StatusCode, header(res, "Retry-After"))
	}
	if res := c.sendMessage(e, "1002", "text/plain", []byte("hi")); res.StatusCode != 200 {
		t.Errorf("another sender: %d", res.StatusCode)
	}
	recv(t, b.messages, "MESSAGE from 1003")
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if res := a.sendMessage(e, "1002", "text/plain", []byte("again")); res.StatusCode != 200 {
		t.Errorf("a second later: %d", res.StatusCode)
	}
	recv(t, b.messages, "MESSAGE at 1002 a second later")
	e.noCalls()
}

// With Config.Offline a message for a user with no phone registered is
// kept (202), or refused 480 when the store refuses it; DeliverKept
// later brings it to the user's phone with the sender's identity.
func TestMessageKeptForLater(t *testing.T) {
	var mu sync.Mutex
	var kept []OfflineMessage
	full := false
	e := newEnv(t, Config{Offline: func(m OfflineMessage) error {
		mu.Lock()
		defer mu.Unlock()
		if full {
			return errors.New("full")
		}
		kept = append(kept, m)
		return nil
	}})
	a := newPhone(t, "1001", nil)
	if res := a.sendMessage(e, "1002", "text/plain", []byte("call me")); res.StatusCode != 202 {
		t.Fatalf("message for nobody registered: %d, want 202", res.StatusCode)
	}
	mu.Lock()
	full = true
	got := kept
	mu.Unlock()
	if len(got) != 1 || got[0].Addressee != "1002" || got[0].Sender != "1001" || got[0].Display != "Anna" || string(got[0].Body) != "call me" {
		t.Fatalf("kept %+v", got)
	}
	if res := a.sendMessage(e, "1002", "text/plain", []byte("again")); res.StatusCode != 480 {
		t.Errorf("store full: %d, want 480", res.StatusCode)
	}
	if code := e.b.DeliverKept(testCtx(t), got[0]); code != 480 {
		t.Errorf("delivering with no phone: %d, want 480", code)
	}
	b := newPhone(t, "1002", nil)
	e.loc.set("1002", b.contact())
	if code := e.b.DeliverKept(testCtx(t), got[0]); code != 200 {
		t.Fatalf("delivering to the registered phone: %d", code)
	}
	m := recv(t, b.messages, "kept MESSAGE at 1002")
	if string(m.Body()) != "call me" || m.From().Address.User != "1001" || m.From().DisplayName != "Anna" {
		t.Errorf("delivered: From %v body %q", m.From(), m.Body())
	}
	e.noCalls()
}

// A message for a user registered at another pool member is not sent
// there unsigned (the member would challenge it) nor kept here: 480.
func TestMessageForAnotherPoolMember(t *testing.T) {
	var kept atomic.Int32
	e := newEnv(t, Config{Offline: func(OfflineMessage) error { kept.Add(1); return nil }})
	member := newPhone(t, "1002", nil)
	e.loc.mu.Lock()
	e.loc.pool = []Contact{member.contact()}
	e.loc.mu.Unlock()
	a := newPhone(t, "1001", nil)
	if res := a.sendMessage(e, "1002", "text/plain", []byte("hi")); res.StatusCode != 480 || kept.Load() != 0 {
		t.Errorf("message for a user at another member: %d, kept %d; want 480, none kept", res.StatusCode, kept.Load())
	}
	select {
	case m := <-member.messages:
		t.Errorf("the member got a MESSAGE: %v", m)
	default:
	}
	e.noCalls()
}
