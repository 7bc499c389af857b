package gateway

import (
	"testing"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/mode"
)

func TestContactURI(t *testing.T) {
	for in, want := range map[string]string{
		`<sip:1002@198.18.0.20:5062;transport=UDP>`:                   "sip:1002@198.18.0.20:5062;transport=UDP",
		`"Alice, Front" <sip:1002@198.18.0.20>;+sip.instance="<urn>"`: "sip:1002@198.18.0.20",
		`sip:1002@198.18.0.20;expires=60`:                             "sip:1002@198.18.0.20",
		` <sips:1002@example.com> `:                                   "sips:1002@example.com",
	} {
		if got := contactURI(in); got != want {
			t.Errorf("contactURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// The voicemail pilot is routed by the dial plan of the call's mode: to HQ
// in normal mode, to the PSTN (survivable alternative) in survivable mode;
// users without voicemail, and a pilot without a route, get none. A call
// keeps the router it was admitted with; the next one sees the change.
func TestRouterVoicemailFollowsMode(t *testing.T) {
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.Dialplan = dialplan.Config{Rules: []dialplan.Rule{
		{Name: "vm", Match: `^5000$`, Route: dialplan.RouteHQ,
			Survivable: &dialplan.Alt{Route: dialplan.RoutePSTN, Prepend: "+7843555"}},
		{Name: "local", Match: `^1\d{3}$`, Route: dialplan.RouteLocal},
	}}
	cfg.Voicemail = Voicemail{Pilot: "5000", Users: []string{"1001"}}
	s, err := New(t.Context(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := s.policy().Router
	if d, ok := r.Voicemail("1001"); !ok || d.Route != dialplan.RouteHQ || d.Target != "5000" {
		t.Errorf("normal mode: %+v %v", d, ok)
	}
	if _, ok := r.Voicemail("1002"); ok {
		t.Error("a user without voicemail is forwarded")
	}
	s.SetMode(mode.Survivable)
	if d, ok := r.Voicemail("1001"); !ok || d.Route != dialplan.RouteHQ {
		t.Errorf("a call admitted in normal mode: %+v %v", d, ok)
	}
	r = s.policy().Router
	if d, ok := r.Voicemail("1001"); !ok || d.Route != dialplan.RoutePSTN || d.Target != "+78435555000" {
		t.Errorf("survivable mode: %+v %v", d, ok)
	}
	cfg.Voicemail.Pilot = "6000" // no rule matches
	if err := s.Reconfigure(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Voicemail("1001"); !ok {
		t.Error("a call admitted before the push lost its pilot")
	}
	if d, ok := s.policy().Router.Voicemail("1001"); ok {
		t.Errorf("unroutable pilot: %+v", d)
	}
	s.Close()
}

// A registered contact carries the listener its REGISTER arrived on, so
// that calls to it leave from there (b2bua.Contact.Local).
func TestLocatorContactLocal(t *testing.T) {
	s := startServer(t, testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"}))
	lis := s.Listeners()[0]
	p := newPhone(t, lis)
	p.registerAs1001()
	cs := locator{reg: s.Registrar()}.Contacts("1001")
	if len(cs) != 1 || "udp:"+cs[0].Local != lis {
		t.Fatalf("contacts %+v, want one with Local %s", cs, lis)
	}
}
