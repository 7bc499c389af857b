package b2bua

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// redirectTo answers an INVITE 302 with a Contact per target (user@addr,
// with q when q is not "").
func redirectTo(targets ...[3]string) script { return redirectWith(302, targets...) }

// redirectWith is redirectTo with another 3xx status.
func redirectWith(status int, targets ...[3]string) script {
	return func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		var hdrs []sip.Header
		for _, t := range targets {
			h := &sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: t[0]}}
			host, port, _ := sip.ParseAddr(t[1])
			h.Address.Host, h.Address.Port = host, port
			if t[2] != "" {
				h.Params.Add("q", t[2])
			}
			hdrs = append(hdrs, h)
		}
		if err := d.Respond(status, "Redirect", nil, hdrs...); err != nil {
			p.t.Errorf("%s: %d: %v", p.user, status, err)
		}
	}
}

func setScript(p *phone, sc script) {
	p.mu.Lock()
	p.script = sc
	p.mu.Unlock()
}

// A 302 from the PSTN gateway sends the call to its Contact, which answers:
// the caller is connected there.
func TestRedirectFollowed(t *testing.T) {
	there := newPhone(t, "there", answerNow)
	gw := newPhone(t, "gw", redirectTo([3]string{"5550100", there.addr, ""}))
	e := newEnv(t, Config{PSTNGateways: pstn("udp:" + gw.addr)})
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "90441234567", nil)
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200 from the redirect target", oc.final, oc.err)
	}
	recv(t, gw.invites, "INVITE at the gateway")
	if inv := recv(t, there.invites, "INVITE at the redirect target"); inv.Recipient.User != "5550100" {
		t.Errorf("redirect target's Request-URI %s, want the Contact's user", inv.Recipient.String())
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, there.answered, "redirect target confirmed")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, there.byes, "BYE at the redirect target")
	e.noCalls()
}

// Contacts are tried highest q first, each by the retry rule: a 503 moves
// on to the next, a 404 is the answer (the lowest-q Contact is never
// called).
func TestRedirectQOrderAndRetryRule(t *testing.T) {
	busy := newPhone(t, "busy", reject(503))
	nf := newPhone(t, "nf", reject(404))
	last := newPhone(t, "last", answerNow)
	gw := newPhone(t, "gw", redirectTo(
		[3]string{"c", last.addr, "0.1"},
		[3]string{"a", busy.addr, "0.9"},
		[3]string{"b", nf.addr, "0.5"},
	))
	e := newEnv(t, Config{PSTNGateways: pstn("udp:" + gw.addr)})
	a := newPhone(t, "1001", nil)
	oc := a.dial(testCtx(t), e.box, "90441234567", nil)
	if oc.final != 404 {
		t.Fatalf("A got %d (%v), want the q=0.5 Contact's 404", oc.final, oc.err)
	}
	recv(t, busy.invites, "INVITE at the q=0.9 Contact")
	recv(t, nf.invites, "INVITE at the q=0.5 Contact")
	e.noCalls()
	if len(last.invites) != 0 {
		t.Error("the q=0.1 Contact was called after a 404")
	}
}

// A redirect loop (A → B → A) ends the call with a failure answer at once:
// each target is called once.
func TestRedirectLoop(t *testing.T) {
	pa := newPhone(t, "pa", nil)
	pb := newPhone(t, "pb", nil)
	setScript(pa, redirectTo([3]string{"x", pb.addr, ""}))
	setScript(pb, redirectTo([3]string{"0441234567", pa.addr, ""}))
	e := newEnv(t, Config{PSTNGateways: pstn("udp:" + pa.addr)})
	a := newPhone(t, "1001", nil)
	start := time.Now()
	oc := a.dial(testCtx(t), e.box, "90441234567", nil)
	if oc.final != 480 {
		t.Fatalf("A got %d (%v), want 480", oc.final, oc.err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the loop took %v to fail", d)
	}
	recv(t, pa.invites, "INVITE at A")
	recv(t, pb.invites, "INVITE at B")
	e.noCalls()
	if n := len(pa.invites) + len(pb.invites); n != 0 {
		t.Errorf("%d more INVITEs in the loop", n)
	}
}

// Redirects are followed at most 5 hops deep: a target that keeps
// redirecting to new users is called 6 times, then the caller gets 480.
func TestRedirectHopLimit(t *testing.T) {
	r := newPhone(t, "r", nil)
	setScript(r, func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		n, _ := strconv.Atoi(req.Recipient.User)
		redirectTo([3]string{strconv.Itoa(n + 1), r.addr, ""})(p, d, req)
	})
	e := newEnv(t, Config{PSTNGateways: pstn("udp:" + r.addr)})
	a := newPhone(t, "1001", nil)
	oc := a.dial(testCtx(t), e.box, "9100", nil)
	if oc.final != 480 {
		t.Fatalf("A got %d (%v), want 480", oc.final, oc.err)
	}
	e.noCalls()
	if n := len(r.invites); n != 1+maxRedirects {
		t.Errorf("%d INVITEs, want %d (the first and %d redirects)", n, 1+maxRedirects, maxRedirects)
	}
}

// A 300 Multiple Choices is followed like a 302 (highest q first), and a
// 305 Use Proxy sends the same request, Request-URI and all, through the
// proxy its Contact names.
func TestRedirect300And305(t *testing.T) {
	for _, c := range []struct {
		status   int
		wantUser string // the Request-URI user at the answering target
	}{{300, "5550100"}, {305, "0441234567"}} {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			there := newPhone(t, "there", answerNow)
			other := newPhone(t, "other", reject(404))
			gw := newPhone(t, "gw", redirectWith(c.status, [3]string{"x", other.addr, "0.2"}, [3]string{"5550100", there.addr, "0.8"}))
			e := newEnv(t, Config{PSTNGateways: pstn("udp:" + gw.addr)})
			a := newPhone(t, "1001", nil)
			ctx := testCtx(t)
			oc := a.dial(ctx, e.box, "90441234567", nil)
			if oc.err != nil || oc.final != 200 {
				t.Fatalf("A got %d (%v), want 200 from the q=0.8 Contact", oc.final, oc.err)
			}
			if inv := recv(t, there.invites, "INVITE at the q=0.8 Contact"); inv.Recipient.User != c.wantUser {
				t.Errorf("Request-URI there %s, want user %s", inv.Recipient.String(), c.wantUser)
			}
			if err := oc.sess.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			recv(t, there.answered, "the q=0.8 Contact confirmed")
			if err := oc.sess.Bye(ctx); err != nil {
				t.Fatal(err)
			}
			recv(t, there.byes, "BYE at the q=0.8 Contact")
			e.noCalls()
			if len(other.invites) != 0 {
				t.Error("the q=0.2 Contact was called after the q=0.8 one answered")
			}
		})
	}
}

// tlsTrunk is a staticTrunk that follows TLS redirects: it records the
// Contacts it was asked to connect to and refuses them all.
type tlsTrunk struct {
	staticTrunk
	asked chan string
}

func (s *tlsTrunk) ConnectRedirect(_ context.Context, hostport string) (string, error) {
	s.asked <- hostport
	return "", errors.New("tls handshake refused")
}

// redirectContacts answers an INVITE 302 with the Contacts given as text.
func redirectContacts(contacts ...string) script {
	return func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		var hdrs []sip.Header
		for _, c := range contacts {
			hdrs = append(hdrs, sip.NewHeader("Contact", c))
		}
		if err := d.Respond(302, "Moved", nil, hdrs...); err != nil {
			p.t.Errorf("%s: 302: %v", p.user, err)
		}
	}
}

// HQ's 302 to a sips: Contact (a pool on 5061) is followed over TLS through
// the trunk, which connects by the Contact's host and default TLS port; a
// failed connection moves on to the next Contact by the retry rule. The
// same Contacts from a PSTN gateway are not followed over TLS: the box's
// TLS trust is HQ's.
func TestRedirectToTLSFromHQOnly(t *testing.T) {
	plan, err := dialplan.Compile(dialplan.Config{Rules: []dialplan.Rule{
		{Name: "hq", Match: `^3\d{3}$`, Route: dialplan.RouteHQ},
		{Name: "pstn", Match: `^9\d+$`, Route: dialplan.RoutePSTN},
	}})
	if err != nil {
		t.Fatal(err)
	}
	there := newPhone(t, "there", answerNow)
	moved := redirectContacts("<sips:3001@pool2.hq.test>", "<sip:3001@pool3.hq.test:5061;transport=tls>;q=0.9", "<sip:3001@"+there.addr+">;q=0.5")
	hq := newPhone(t, "hq", moved)
	gw := newPhone(t, "gw", moved)
	trunk := &tlsTrunk{staticTrunk: staticTrunk{targets: []string{"udp:" + hq.addr}}, asked: make(chan string, 4)}
	e := newEnvRouter(t, Config{HQ: trunk, PSTNGateways: pstn("udp:" + gw.addr)}, planRouter{p: plan})
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	for _, tc := range []struct {
		dial  string
		asked []string
	}{
		{dial: "3001", asked: []string{"pool2.hq.test:5061", "pool3.hq.test:5061"}},
		{dial: "90441234567"},
	} {
		oc := a.dial(ctx, e.box, tc.dial, nil)
		if oc.err != nil || oc.final != 200 {
			t.Fatalf("%s: A got %d (%v), want 200 from the UDP Contact", tc.dial, oc.final, oc.err)
		}
		recv(t, there.invites, "INVITE at the UDP Contact")
		for _, want := range tc.asked {
			if got := recv(t, trunk.asked, "TLS connection asked for"); got != want {
				t.Errorf("%s: connected to %q, want %q", tc.dial, got, want)
			}
		}
		if len(trunk.asked) != 0 {
			t.Errorf("%s: %d more TLS connections asked for", tc.dial, len(trunk.asked))
		}
		if err := oc.sess.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		recv(t, there.answered, "UDP Contact confirmed")
		if err := oc.sess.Bye(ctx); err != nil {
			t.Fatal(err)
		}
		recv(t, there.byes, "BYE at the UDP Contact")
	}
	e.noCalls()
}
