package b2bua

import (
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

var sdpC = []byte("v=0\r\no=c 3 3 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 43000 RTP/AVP 0\r\n")

func parkEnv(t *testing.T, rec *cdrs, timeout time.Duration, overflow string) *env {
	return newEnv(t, Config{OnEnd: rec.on, Park: &Park{Orbits: []string{"701", "702"}, Timeout: timeout, Overflow: overflow}})
}

// parkCall: 1001 calls 1002, who parks it with a REFER to number; the
// transferor hears 100 and 200 and gets a BYE, and the call waits in
// state parked for orbit.
func parkCall(t *testing.T, e *env, a, b *phone, number, orbit string) *outcall {
	t.Helper()
	ctx := testCtx(t)
	oc, d := e.call(ctx, a, b, "1002")
	parkBy(t, e, b, d, number, "SIP/2.0 200 OK")
	recv(t, b.byes, "BYE at the parker")
	waitParked(t, e, orbit)
	return oc
}

// parkBy sends the REFER of a park from b's dialog d and checks the
// final NOTIFY.
func parkBy(t *testing.T, e *env, b *phone, d *sipgo.DialogServerSession, number, final string) {
	t.Helper()
	if res := b.send(testCtx(t), d, boxOfUAS(d), sip.REFER, nil, "", e.referTo(number)); res == nil || res.StatusCode != 202 {
		t.Fatalf("REFER to %s: %v", number, res)
	}
	recv(t, b.notifies, "first NOTIFY")
	if got := sipfrag(t, recv(t, b.notifies, "final NOTIFY")); got != final {
		t.Fatalf("park at %s: final NOTIFY %q, want %q", number, got, final)
	}
}

// waitParked waits until a call is parked in orbit.
func waitParked(t *testing.T, e *env, orbit string) {
	t.Helper()
	for range 1000 {
		for _, c := range e.b.Calls() {
			if c.State == StateParked && c.Target == orbit {
				return
			}
		}
		time.Sleep(2 * time.Millisecond) // the B2BUA's state; no event to wait on
	}
	t.Fatalf("no call parked at %s: %+v", orbit, e.b.Calls())
}

// TestParkAndRetrieve: a call parked with *85 takes the first orbit,
// whose busy lamp lights; a third phone dialling the orbit gets the
// parked caller, who is re-INVITEd with the retriever's session; the
// orbit is then empty and its lamp off.
func TestParkAndRetrieve(t *testing.T) {
	rec := newCDRs()
	e := parkEnv(t, rec, time.Minute, "")
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	c := newPhone(t, "1003", nil)
	c.offer = sdpC
	w := newPhone(t, "1004", nil)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	var s sub
	if res := w.subscribe(ctx, e.box, "701", "dialog", 600, &s); res.StatusCode != 200 {
		t.Fatalf("SUBSCRIBE to the orbit: %d", res.StatusCode)
	}
	if _, body := nextNotify(t, w); strings.Contains(body, "<dialog ") {
		t.Fatalf("empty orbit's lamp:\n%s", body)
	}
	oc := parkCall(t, e, a, b, "*85", "701")
	if len(a.byes) != 0 {
		t.Fatal("the parked party got a BYE")
	}
	if body := waitNotify(t, w, "<state>confirmed</state>"); !strings.Contains(body, "<identity>1001</identity>") {
		t.Errorf("parked lamp:\n%s", body)
	}
	if x := c.dial(ctx, e.box, "702", nil); x.final != 404 {
		t.Errorf("empty orbit: %d", x.final)
	}
	x := c.dial(ctx, e.box, "701", nil)
	if x.final != 200 {
		t.Fatalf("retrieval: %d %v", x.final, x.err)
	}
	re := recv(t, a.reinvites, "re-INVITE at the parked party")
	if !strings.Contains(string(re.Body()), "m=audio 43000 ") {
		t.Errorf("the parked party was not given the retriever's session:\n%s", re.Body())
	}
	// The retriever gets the parked party's answer (answerMirror: its own port).
	if !strings.Contains(string(x.sess.InviteResponse.Body()), "m=audio ") {
		t.Errorf("retriever's answer:\n%s", x.sess.InviteResponse.Body())
	}
	if err := x.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	for body := waitNotify(t, w, "</dialog-info>"); strings.Contains(body, "<dialog "); {
		body = waitNotify(t, w, "</dialog-info>")
	}
	if cs := e.b.Calls(); len(cs) != 1 || cs[0].State != StateAnswered || cs[0].Target != "1003" {
		t.Errorf("calls after the retrieval: %+v", cs)
	}
	if y := c.dial(ctx, e.box, "701", nil); y.final != 404 {
		t.Errorf("the orbit after the retrieval: %d", y.final)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, c.byes, "BYE at the retriever")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Answered || r.Target != "1003" || r.Caller != "1001" {
		t.Errorf("CDR %+v", r)
	}
}

// TestParkOrbitTaken: a park into an occupied orbit is refused (486) and
// the call goes on; *85 takes the next free one, and with every orbit
// taken *85 is refused too.
func TestParkOrbitTaken(t *testing.T) {
	rec := newCDRs()
	e := parkEnv(t, rec, time.Minute, "")
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	oc1 := parkCall(t, e, a, b, "701", "701")
	ctx := testCtx(t)
	a2 := newPhone(t, "1004", nil)
	oc2, d2 := e.call(ctx, a2, b, "1002")
	parkBy(t, e, b, d2, "701", "SIP/2.0 486 Busy Here")
	parkBy(t, e, b, d2, "*85", "SIP/2.0 200 OK")
	recv(t, b.byes, "BYE at the parker")
	waitParked(t, e, "702")
	a3 := newPhone(t, "1005", nil)
	oc3, d3 := e.call(ctx, a3, b, "1002")
	parkBy(t, e, b, d3, "*85", "SIP/2.0 486 Busy Here")
	if err := oc3.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE of the third call at 1002")
	// The parked parties hang up: their orbits are free again.
	for _, oc := range []*outcall{oc1, oc2} {
		if err := oc.sess.Bye(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.noCalls()
	e.b.parks.mu.Lock()
	left := len(e.b.parks.orbits)
	e.b.parks.mu.Unlock()
	if left != 0 {
		t.Errorf("%d orbits still taken", left)
	}
}

// TestParkRingBack: nobody retrieves the call: it rings the parker, who
// answers and has the caller back.
func TestParkRingBack(t *testing.T) {
	rec := newCDRs()
	e := parkEnv(t, rec, 100*time.Millisecond, "")
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	oc := parkCall(t, e, a, b, "*85", "701")
	recv(t, b.invites, "the call at 1002")
	inv := recv(t, b.invites, "the ring-back at the parker")
	if inv.From().Address.User != "1001" {
		t.Errorf("ring-back from %s, want the parked 1001", inv.From().Value())
	}
	recv(t, a.reinvites, "re-INVITE at the parked party")
	if r := rec.next(t); r.Disposition != Transferred {
		t.Errorf("parked call's CDR %+v", r)
	}
	ctx := testCtx(t)
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at the parker")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Answered || r.Dialled != "1002" {
		t.Errorf("ring-back's CDR %+v", r)
	}
}

// TestParkRingBackOverflow: the parker does not take the ring-back: the
// call goes to the overflow; without one the parked party is hung up.
func TestParkRingBackOverflow(t *testing.T) {
	for _, overflow := range []string{"1004", ""} {
		t.Run("overflow="+overflow, func(t *testing.T) {
			rec := newCDRs()
			e := parkEnv(t, rec, 100*time.Millisecond, overflow)
			a := newPhone(t, "1001", nil)
			b := newPhone(t, "1002", answerNow)
			o := newPhone(t, "1004", answerNow)
			e.loc.set("1002", b.contact())
			e.loc.set("1004", o.contact())
			oc := parkCall(t, e, a, b, "*85", "701")
			busy := newPhone(t, "1002", reject(486)) // the parker's phone now refuses
			e.loc.set("1002", busy.contact())
			recv(t, busy.invites, "the ring-back at the parker")
			if overflow == "" {
				recv(t, a.byes, "BYE at the parked party")
				e.noCalls()
				rec.next(t) // the failed ring-back
				if r := rec.next(t); r.Disposition != NoAnswer {
					t.Errorf("parked call's CDR %+v", r)
				}
				return
			}
			recv(t, o.invites, "the overflow's INVITE")
			recv(t, a.reinvites, "re-INVITE at the parked party")
			if err := oc.sess.Bye(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			recv(t, o.byes, "BYE at the overflow")
			e.noCalls()
		})
	}
}
