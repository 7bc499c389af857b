package b2bua

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/media/sdprewrite"
)

// fakeControl records joins; err refuses them.
type fakeControl struct {
	mu    sync.Mutex
	joins [][2]string
	err   error
}

func (f *fakeControl) Join(_ context.Context, id1, id2 string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joins = append(f.joins, [2]string{id1, id2})
	return f.err
}

// msrScript answers INVITEs as media/msr does: 200 with an answer at its
// own port (one per connection) in the reverse direction; the INVITEs
// whose number (1-based) is in refuse get 488.
func msrScript(refuse ...int) script {
	var n atomic.Int32
	return func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		k := int(n.Add(1))
		for _, r := range refuse {
			if r == k {
				respondOrFail(p, d, 488, nil)
				return
			}
		}
		s, err := sdprewrite.Parse(req.Body())
		if err != nil {
			respondOrFail(p, d, 488, nil)
			return
		}
		body := mkSDP("msr", k, 1, 30000+2*k, s.Audio.Direction.Reverse().String())
		if err := d.Respond(200, "OK", body, sip.NewHeader("Content-Type", "application/sdp")); err != nil {
			// The box's BYE (a failed set-up) may overtake the handling
			// of its ACK here; media/msr does not wait for ACKs.
			p.t.Logf("msr: 200: %v", err)
			return
		}
		p.answered <- d
	}
}

// msrEnv is a B2BUA and a fake MSR UA (a phone answering like media/msr).
func msrEnv(t *testing.T, sc script) (*env, *phone, RemoteMSR, *fakeControl) {
	var box atomic.Pointer[sip.Addr]
	e := newEnv(t, Config{LocalFor: func(string) *sip.Addr { return box.Load() }})
	a, err := parseIPAddr(e.box)
	if err != nil {
		t.Fatal(err)
	}
	box.Store(&a)
	m := newPhone(t, "msr", sc)
	ctl := &fakeControl{}
	return e, m, RemoteMSR{Name: "box-b", URI: fmt.Sprintf("sip:lan0;1@%s", m.addr), Control: ctl}, ctl
}

// TestRemoteAnchor: the first offer opens two connections on the MSR (the
// offerer's with its offer, the other inactive) and joins them; the other
// leg is offered the MSR's address; its answer re-INVITEs its connection;
// Close sends a BYE on both.
func TestRemoteAnchor(t *testing.T) {
	e, m, rm, ctl := msrEnv(t, msrScript())
	fellBack := false
	an := e.b.RemoteAnchor("call-1", rm, func() (Anchor, error) {
		fellBack = true
		return nil, errors.New("no fallback in this test")
	}, nil, nil)
	toB, err := an.Offer(LegA, sdpA)
	if err != nil {
		t.Fatal(err)
	}
	invA, invB := recv(t, m.invites, "INVITE for leg A"), recv(t, m.invites, "INVITE for leg B")
	if string(invA.Body()) != string(sdpA) {
		t.Errorf("leg A's connection was not offered A's SDP:\n%s", invA.Body())
	}
	if dirOf(invB.Body()) != "inactive" {
		t.Errorf("leg B's provisional connection is %q, want inactive:\n%s", dirOf(invB.Body()), invB.Body())
	}
	if invA.Recipient.User != "lan0;1" || !strings.HasPrefix(invA.To().Address.User, "lan0;1") {
		t.Errorf("INVITE to %s (To %s), want the MSR UA lan0;1", invA.Recipient.String(), invA.To().Address.String())
	}
	s, err := sdprewrite.Parse(toB)
	if err != nil || s.Audio.Port != 30004 || s.Audio.Addr.String() != "127.0.0.1" || s.Audio.Direction != sdprewrite.SendRecv {
		t.Errorf("offer to leg B is not the MSR's second connection, sendrecv:\n%s", toB)
	}
	if s.Origin.Username != "outpost" {
		t.Errorf("offer to leg B carries o=%+v, want our own", s.Origin)
	}
	ctl.mu.Lock()
	joins := ctl.joins
	ctl.mu.Unlock()
	tagOf := func(r *sip.Request) string { v, _ := r.From().Params.Get("tag"); return v }
	if len(joins) != 1 || !strings.HasSuffix(joins[0][0], ":"+tagOf(invA)) || !strings.HasSuffix(joins[0][1], ":"+tagOf(invB)) {
		t.Errorf("joins %v, want the two connections (MSR-tag:our-tag of %s, %s)", joins, tagOf(invA), tagOf(invB))
	}

	toA, err := an.Answer(LegB, sdpB)
	if err != nil {
		t.Fatal(err)
	}
	re := recv(t, m.reinvites, "re-INVITE of leg B's connection")
	if rs, _ := sdprewrite.Parse(re.Body()); rs == nil || rs.Audio.Port != 41000 {
		t.Errorf("leg B's connection was re-INVITEd with\n%s\nwant B's answer (port 41000)", re.Body())
	}
	if a, _ := sdprewrite.Parse(toA); a == nil || a.Audio.Port != 30002 {
		t.Errorf("answer to leg A is not the MSR's first connection:\n%s", toA)
	}
	// The same answer again (an 18x's SDP repeated in the 2xx): the same
	// answer to A, no second re-INVITE.
	if again, err := an.Answer(LegB, sdpB); err != nil || string(again) != string(toA) {
		t.Errorf("repeated answer: %v\n%s\nwant\n%s", err, again, toA)
	}
	select {
	case r := <-m.reinvites:
		t.Errorf("a repeated answer re-INVITEd the MSR:\n%s", r.Body())
	default:
	}

	// A hold from A: its connection is re-INVITEd, B is offered sendonly.
	toB2, err := an.Offer(LegA, mkSDP("a", 1, 2, 40000, "sendonly"))
	if err != nil {
		t.Fatal(err)
	}
	recv(t, m.reinvites, "re-INVITE of leg A's connection")
	if dirOf(toB2) != "sendonly" {
		t.Errorf("hold offered to B as %q:\n%s", dirOf(toB2), toB2)
	}
	if s2, _ := sdprewrite.Parse(toB2); s2 == nil || s2.Origin.Version != s.Origin.Version+1 || s2.Origin.SessID != s.Origin.SessID {
		t.Errorf("o= of the changed offer to B: %+v after %+v", s2.Origin, s.Origin)
	}
	an.Reject(LegA)

	an.Close()
	recv(t, m.byes, "BYE of a connection")
	recv(t, m.byes, "BYE of the other connection")
	if fellBack {
		t.Error("fell back although the MSR answered")
	}
	e.noCalls()
}

// TestRemoteAnchorFallback: when the MSR refuses a connection or the join,
// what was opened there gets a BYE and the fallback anchor takes over.
func TestRemoteAnchorFallback(t *testing.T) {
	for _, c := range []struct {
		name    string
		refuse  []int
		joinErr error
		byes    int
	}{
		{"second INVITE refused", []int{2}, nil, 1},
		{"first INVITE refused", []int{1}, nil, 0},
		{"join refused", nil, errors.New("412 connection does not exist"), 2},
		{"MSR silent", nil, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, m, rm, ctl := msrEnv(t, msrScript(c.refuse...))
			ctl.err = c.joinErr
			if c.name == "MSR silent" {
				// A socket that reads nothing: no response at all, the
				// set-up gives up after msrSetupTimeout.
				rm.URI = "sip:lan0;1@" + listenUDP(t).LocalAddr().String()
			}
			fa := &fakeAnchor{}
			var why error
			an := e.b.RemoteAnchor("call-2", rm, func() (Anchor, error) { return fa, nil }, func(err error) { why = err }, nil)
			out, err := an.Offer(LegA, sdpA)
			if err != nil || !strings.Contains(string(out), "a=x-anchor:offer-A") {
				t.Fatalf("offer after the MSR failed: %v\n%s", err, out)
			}
			if why == nil {
				t.Error("onFallback not told")
			}
			for range c.byes {
				recv(t, m.byes, "BYE of an opened connection")
			}
			if _, err := an.Answer(LegB, sdpB); err != nil {
				t.Error(err)
			}
			an.Close()
			if ops, closed := fa.snapshot(); closed != 1 || len(ops) != 2 {
				t.Errorf("fallback anchor: ops %v, closed %d", ops, closed)
			}
			select {
			case r := <-m.byes:
				t.Errorf("unexpected BYE: %s", r.StartLine())
			default:
			}
			e.noCalls()
		})
	}
}

// TestRemoteAnchorMSRBye: a BYE from the MSR (its inactivity timeout) is
// answered and ends the call through onDead; Close then ends only the
// other connection.
func TestRemoteAnchorMSRBye(t *testing.T) {
	e, m, rm, _ := msrEnv(t, msrScript())
	dead := make(chan string, 2)
	an := e.b.RemoteAnchor("call-3", rm, func() (Anchor, error) { return nil, errors.New("no fallback") }, nil,
		func(reason string) { dead <- reason })
	if _, err := an.Offer(LegA, sdpA); err != nil {
		t.Fatal(err)
	}
	d := recv(t, m.answered, "connection A")
	recv(t, m.answered, "connection B")
	if err := d.Bye(testCtx(t)); err != nil {
		t.Fatalf("BYE from the MSR: %v", err)
	}
	if why := recv(t, dead, "onDead"); !strings.Contains(why, "box-b") {
		t.Errorf("onDead(%q)", why)
	}
	an.Close()
	recv(t, m.byes, "BYE of the other connection")
	select {
	case r := <-m.byes:
		t.Errorf("a second BYE: %s", r.StartLine())
	default:
	}
	e.noCalls()
}
