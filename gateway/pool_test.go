package gateway

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/pool"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/siptarget"
)

func testPoolServer(t *testing.T) *Server {
	t.Helper()
	p, err := pool.New(pool.Config{Self: "box-a", Domain: "bench.local", Secret: "shared-between-members", Members: []pool.Member{
		{Name: "box-a", Target: siptarget.MustParse("udp:198.18.60.1:5060", "")},
		{Name: "box-b", Target: siptarget.MustParse("udp:198.18.60.2:5060", "")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{log: slog.New(slog.DiscardHandler), b2b: &b2bua.B2BUA{}}
	s.now.Store(&running{pool: p})
	return s
}

// memberInvite is an INVITE from user 1001 to 1002 as another member sends it.
func memberInvite(src string) *sip.Request {
	req := inviteFrom("UDP", src)
	req.AppendHeader(&sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "1001", Host: "198.18.60.2"}})
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "1002", Host: "198.18.60.1"}})
	callID := sip.CallIDHeader("pool-call-1")
	req.AppendHeader(&callID)
	return req
}

// A member's INVITE is trusted by its address and its signature, never by
// the address alone, and a signature from elsewhere is nobody's.
func TestFromPool(t *testing.T) {
	s := testPoolServer(t)
	signed := func(src, secret string, at time.Time) *sip.Request {
		req := memberInvite(src)
		req.AppendHeader(sip.NewHeader(pool.Header, pool.Sign(secret, "pool-call-1", "1001", "1002", at)))
		return req
	}
	now := time.Now()
	for _, c := range []struct {
		name string
		req  *sip.Request
		want bool
	}{
		{"member, signed", signed("198.18.60.2:5060", "shared-between-members", now), true},
		{"member, unsigned", memberInvite("198.18.60.2:5060"), false},
		{"member, wrong secret", signed("198.18.60.2:5060", "not-the-pool-secret!", now), false},
		{"member, stale signature", signed("198.18.60.2:5060", "shared-between-members", now.Add(-2*pool.Window)), false},
		{"member's IP, other port", signed("198.18.60.2:40000", "shared-between-members", now), false},
		{"a stranger with a valid signature", signed("198.18.60.9:5060", "shared-between-members", now), false},
	} {
		if got := s.fromPool(s.now.Load(), c.req); got != c.want {
			t.Errorf("%s: fromPool = %v, want %v", c.name, got, c.want)
		}
	}
	// Signing and checking agree (the B2BUA signs with signPool).
	req := memberInvite("198.18.60.2:5060")
	s.now.Load().signPool(req)
	if !s.fromPool(s.now.Load(), req) {
		t.Fatal("an INVITE signed by signPool is refused")
	}
}

func TestPoolRedirectAndPeers(t *testing.T) {
	s := testPoolServer(t)
	p := s.now.Load().pool
	for _, ext := range []string{"1001", "1002", "1003", "1004"} {
		uris := s.redirect(ext)
		order := p.Order(ext)
		home, away := order[0], order[0].Name != "box-a"
		// Away, the 301 names the home and then its backup: this box, the
		// pool's other member.
		if away && !slices.Equal(uris, []string{"sip:" + home.Target.HostPort(), "sip:" + order[1].Target.HostPort()}) || !away && uris != nil {
			t.Errorf("%s (home %s): redirect = %q", ext, home.Name, uris)
		}
		cs := poolLocator{s: s}.PoolContacts(ext)
		if len(cs) != 1 || cs[0].Addr != "198.18.60.2:5060" || cs[0].URI != "sip:"+ext+"@198.18.60.2:5060" {
			t.Errorf("%s: pool contacts = %+v", ext, cs)
		}
	}
	// Draining, box-a hands its own users over to their backup, box-b.
	s.Drain(true, time.Now().Add(time.Minute))
	for _, ext := range []string{"1001", "1002", "1003", "1004"} {
		if got := s.redirect(ext); !slices.Equal(got, []string{"sip:198.18.60.2:5060"}) {
			t.Errorf("%s while box-a drains: redirect = %q, want box-b", ext, got)
		}
		// Its calls go there too, the Request-URI's user kept.
		if to := s.movedTo(ext); len(to) != 1 || memberURI(to[0].Target, "5551234") != "sip:5551234@198.18.60.2:5060" {
			t.Errorf("%s while box-a drains: its calls move to %+v, want box-b", ext, to)
		}
	}
}

// A member's 2xx to a REGISTER of a user whose home is another member
// says that this box serves it as backup; the user's own home says
// nothing, and neither does a de-registration's answer.
func TestBackupWarning(t *testing.T) {
	s := testPoolServer(t)
	run := s.now.Load()
	run.cfg.Warning.Agent = "branch-1"
	answer := func(user string, bound bool) *sip.Response {
		req := sip.NewRequest(sip.REGISTER, sip.Uri{Scheme: "sip", Host: "bench.local"})
		req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: user, Host: "bench.local"}})
		req.AppendHeader(&sip.CSeqHeader{SeqNo: 1, MethodName: sip.REGISTER})
		res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
		if bound {
			res.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: user, Host: "198.18.60.20"}})
		}
		return res
	}
	var homedHere, homedAway string
	for _, u := range []string{"1001", "1002", "1003", "1004", "1005", "1006"} {
		if run.pool.Order(u)[0].Name == "box-a" {
			homedHere = u
		} else {
			homedAway = u
		}
	}
	if homedHere == "" || homedAway == "" {
		t.Fatal("the test's users are all homed at one member")
	}
	want := `399 branch-1 "Backup registrar box-a: home registrar box-b out of service"`
	if got := run.backupWarning(answer(homedAway, true)); got != want {
		t.Errorf("served as backup: %q, want %q", got, want)
	}
	res := answer(homedAway, true)
	run.warn(res, mode.Normal)
	if ws := res.GetHeaders("Warning"); len(ws) != 1 || ws[0].Value() != want {
		t.Errorf("warn in normal mode: Warning %v, want %q", ws, want)
	}
	if got := run.backupWarning(answer(homedHere, true)); got != "" {
		t.Errorf("served at home: %q", got)
	}
	if got := run.backupWarning(answer(homedAway, false)); got != "" {
		t.Errorf("de-registered: %q", got)
	}
	run.cfg.Warning.Off = true
	if got := run.backupWarning(answer(homedAway, true)); got != "" {
		t.Errorf("warnings off: %q", got)
	}
}
