package b2bua

import (
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/health"
)

// TestFailoverRetry5xx: a 500 is the gateway's answer by default, and
// moves on to the next gateway when the route lists it; the gateway that
// answered it is then blocked like one that answered 503.
func TestFailoverRetry5xx(t *testing.T) {
	for _, c := range []struct {
		name  string
		retry []int
		want  int // the caller's final answer
	}{
		{"default: 500 is the answer", nil, 500},
		{"500 listed: the next gateway answers", []int{500, 502}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			gw1 := newPhone(t, "gw1", reject(500))
			gw2 := newPhone(t, "gw2", answerNow)
			tr := health.New(health.Config{BlockFor: time.Minute})
			e := newEnv(t, Config{PSTNGateways: pstn("udp:"+gw1.addr, "udp:"+gw2.addr), PSTNHealth: tr,
				PSTNFailover: Failover{Retry5xx: c.retry}})
			a := newPhone(t, "1001", nil)
			ctx := testCtx(t)
			oc := a.dial(ctx, e.box, "90441234567", nil)
			if oc.final != c.want {
				t.Fatalf("A got %d (%v), want %d", oc.final, oc.err, c.want)
			}
			recv(t, gw1.invites, "INVITE at gateway 1")
			blocked := !tr.Eligible("udp:" + gw1.addr)
			if c.want == 200 {
				recv(t, gw2.invites, "INVITE at gateway 2")
				if err := oc.sess.Ack(ctx); err != nil {
					t.Fatal(err)
				}
				recv(t, gw2.answered, "gateway 2 confirmed")
				if err := oc.sess.Bye(ctx); err != nil {
					t.Fatal(err)
				}
				recv(t, gw2.byes, "BYE at gateway 2")
				if !blocked {
					t.Error("gateway 1 answered a retryable 500 and is not blocked")
				}
			} else {
				if len(gw2.invites) != 0 {
					t.Error("gateway 2 got an INVITE after gateway 1's 500")
				}
				if blocked {
					t.Error("gateway 1 answered 500 for itself and is blocked")
				}
			}
			e.noCalls()
		})
	}
}

// TestFailoverMaxTargets: with max_targets 1 the call ends with the first
// gateway's 503; the second is never tried.
func TestFailoverMaxTargets(t *testing.T) {
	gw1 := newPhone(t, "gw1", reject(503))
	gw2 := newPhone(t, "gw2", answerNow)
	e := newEnv(t, Config{PSTNGateways: pstn("udp:"+gw1.addr, "udp:"+gw2.addr), PSTNFailover: Failover{MaxTargets: 1}})
	a := newPhone(t, "1001", nil)
	oc := a.dial(testCtx(t), e.box, "90441234567", nil)
	if oc.final != 503 {
		t.Errorf("A got %d (%v), want gateway 1's 503", oc.final, oc.err)
	}
	recv(t, gw1.invites, "INVITE at gateway 1")
	if len(gw2.invites) != 0 {
		t.Error("gateway 2 got an INVITE beyond max_targets")
	}
	e.noCalls()
}

// TestFailoverAttemptTimeout: the route's attempt timeout, not the
// B2BUA's, decides when a silent gateway is given up: with the B2BUA's
// at an hour, the call still reaches the second gateway.
func TestFailoverAttemptTimeout(t *testing.T) {
	dead := listenUDP(t)
	t.Cleanup(func() { _ = dead.Close() })
	gw2 := newPhone(t, "gw2", reject(486))
	e := newEnv(t, Config{
		PSTNGateways:   pstn("udp:"+dead.LocalAddr().String(), "udp:"+gw2.addr),
		AttemptTimeout: time.Hour,
		PSTNFailover:   Failover{AttemptTimeout: 300 * time.Millisecond},
	})
	a := newPhone(t, "1001", nil)
	oc := a.dial(testCtx(t), e.box, "90441234567", nil)
	if oc.final != 486 {
		t.Errorf("A got %d (%v), want gateway 2's 486", oc.final, oc.err)
	}
	recv(t, gw2.invites, "INVITE at gateway 2")
	e.noCalls()
}

// backupTrunk is a staticTrunk whose backup pool holds the targets in
// backup.
type backupTrunk struct {
	staticTrunk
	backup map[string]bool
}

func (b *backupTrunk) Backup(target string) bool { return b.backup[target] }

// TestFailoverPerHQPool: HQ's primary pool moves on after a 500 (its
// retry_5xx) and is capped at one target; its backup pool moves on after
// a 502 (its own list, not the primary's): a call tries the primary's
// first target, skips its second, and reaches the backup's second.
func TestFailoverPerHQPool(t *testing.T) {
	plan, err := dialplan.Compile(dialplan.Config{Rules: []dialplan.Rule{{Name: "hq", Match: `^2\d{3}$`, Route: dialplan.RouteHQ}}})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := newPhone(t, "p1", reject(500)), newPhone(t, "p2", answerNow)
	b1, b2 := newPhone(t, "b1", reject(502)), newPhone(t, "b2", answerNow)
	trunk := &backupTrunk{staticTrunk: staticTrunk{targets: []string{"udp:" + p1.addr, "udp:" + p2.addr, "udp:" + b1.addr, "udp:" + b2.addr}},
		backup: map[string]bool{"udp:" + b1.addr: true, "udp:" + b2.addr: true}}
	e := newEnvRouter(t, Config{HQ: trunk,
		HQFailover:       Failover{MaxTargets: 1, Retry5xx: []int{500}},
		HQBackupFailover: &Failover{Retry5xx: []int{502}},
	}, planRouter{p: plan})
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "2001", nil)
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200 from the backup's second target", oc.final, oc.err)
	}
	recv(t, p1.invites, "INVITE at the primary's first target")
	recv(t, b1.invites, "INVITE at the backup's first target")
	recv(t, b2.invites, "INVITE at the backup's second target")
	if len(p2.invites) != 0 {
		t.Error("the primary's second target was tried beyond its max_targets")
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b2.answered, "the backup's second target confirmed")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b2.byes, "BYE at the backup's second target")
	e.noCalls()
}
