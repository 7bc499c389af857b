package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseListen(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Listen
		err  string
	}{
		{in: "udp:0.0.0.0:5060", want: Listen{Transport: "udp", Host: "0.0.0.0", Port: 5060}},
		{in: "tcp:[::1]:5060", want: Listen{Transport: "tcp", Host: "::1", Port: 5060}},
		{in: "udp:127.0.0.1:0", want: Listen{Transport: "udp", Host: "127.0.0.1", Port: 0}},
		{in: "udp:10.0.0.1", want: Listen{Transport: "udp", Host: "10.0.0.1", Port: 5060}},
		{in: "tls:[2001:db8::1]", want: Listen{Transport: "tls", Host: "2001:db8::1", Port: 5061}},
		{in: "tls:[fe80::1%lan0]:5061", want: Listen{Transport: "tls", Host: "fe80::1%lan0", Port: 5061}},
		{in: "udp:1.2.3:99999", err: `bad listen spec "udp:1.2.3:99999": port out of range`},
		{in: "udp:1.2.3.4:99999999999999999999", err: `bad listen spec "udp:1.2.3.4:99999999999999999999": port out of range`},
		{in: "udp:1.2.3.4:-1", err: `bad listen spec "udp:1.2.3.4:-1": bad port "-1"`},
		{in: "udp:1.2.3.4:+1", err: `bad listen spec "udp:1.2.3.4:+1": bad port "+1"`},
		{in: "udp:1.2.3:5060", err: `bad listen spec "udp:1.2.3:5060": host "1.2.3" is neither an IP address nor an interface name`},
		{in: "udp:wan0:5060", want: Listen{Transport: "udp", Port: 5060, Interface: "wan0"}},
		{in: "tcp:*", want: Listen{Transport: "tcp", Port: 5060, Interface: "*"}},
		{in: "udp:eth0.100", want: Listen{Transport: "udp", Port: 5060, Interface: "eth0.100"}},
		{in: "udp:a/b:5060", err: `bad listen spec "udp:a/b:5060": host "a/b" is neither an IP address nor an interface name`},
		{in: "udp:averyveryverylongname:5060", err: `bad listen spec "udp:averyveryverylongname:5060": host "averyveryverylongname" is neither an IP address nor an interface name`},
		{in: "ws:0.0.0.0:80", err: `bad listen spec "ws:0.0.0.0:80": unknown transport "ws" (want udp, tcp or tls)`},
		{in: "udp:::1", err: `bad listen spec "udp:::1": IPv6 address must be in brackets, e.g. udp:[::1]:5060`},
		{in: "udp:[::1]x", err: `bad listen spec "udp:[::1]x": unexpected "x" after ']'`},
		{in: "udp:[::1]:", err: `bad listen spec "udp:[::1]:": missing port after ':'`},
		{in: "udp:", err: `bad listen spec "udp:": missing host (use 0.0.0.0 or [::] for all addresses)`},
		{in: "0.0.0.0:5060", err: `bad listen spec "0.0.0.0:5060": unknown transport "0.0.0.0" (want udp, tcp or tls)`},
	} {
		got, err := ParseListen(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseListen(%q) error = %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseListen(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		// String gives a spec that parses to the same thing.
		if again, err := ParseListen(got.String()); err != nil || again != got {
			t.Errorf("ParseListen(%q) = %+v, %v", got.String(), again, err)
		}
	}
	if got := (Listen{Transport: "tcp", Host: "::1", Port: 5060}).String(); got != "tcp:[::1]:5060" {
		t.Errorf("String = %q", got)
	}
}

func TestDefault(t *testing.T) {
	d := Default()
	if errs := d.Validate(); errs != nil {
		t.Fatalf("Default().Validate() = %v", errs)
	}
	if !d.Standalone() {
		t.Error("default is not standalone")
	}
	if !slices.Equal(d.SIP.Listen, []string{"udp:127.0.0.1:5060", "tcp:127.0.0.1:5060"}) {
		t.Errorf("listen = %v", d.SIP.Listen)
	}
	if d.Site.Name != "outpost-default" || d.Site.Domain != "outpost.local" || d.SIP.EffectiveRealm(d.Site) != "outpost.local" {
		t.Errorf("site = %+v, realm %q", d.Site, d.SIP.Realm)
	}
	var exts, pws []string
	for _, u := range d.Users {
		exts = append(exts, u.Extension)
		pws = append(pws, u.Password)
	}
	if !slices.Equal(exts, []string{"1001", "1002", "1003"}) || !slices.Equal(pws, []string{"demo1001", "demo1002", "demo1003"}) {
		t.Errorf("users = %+v", d.Users)
	}
	if !slices.Equal(d.PSTN.Emergency, []string{"112", "911"}) {
		t.Errorf("emergency = %v", d.PSTN.Emergency)
	}
	if len(d.Dialplan) != 1 || d.Dialplan[0].Match != `^1\d{3}$` || d.Dialplan[0].Route != "local" {
		t.Errorf("dialplan = %+v", d.Dialplan)
	}
	if !reflect.DeepEqual(d.Media, Media{}) {
		t.Errorf("media = %+v, want defaults", d.Media)
	}
	// Each call is a fresh copy.
	d.Users[0].Password = "changed"
	if Default().Users[0].Password != "demo1001" {
		t.Error("Default shares state between calls")
	}
	if s := sealed(t, Default(), nil); s.Validate() != nil {
		t.Errorf("sealed default does not validate: %v", s.Validate())
	}
	if !json.Valid(DefaultJSON()) {
		t.Error("DefaultJSON is not JSON")
	}
}

func TestZeroValueDefaults(t *testing.T) {
	var d Document
	if d.SIP.MinExpires() != 60 || d.SIP.MaxExpires() != 3600 {
		t.Error("expires defaults")
	}
	// MD5 alone: clients that stop at an unknown algorithm still register.
	if !slices.Equal(d.SIP.DigestAlgorithms(), []string{"MD5"}) {
		t.Errorf("digest default %q, want MD5 alone", d.SIP.DigestAlgorithms())
	}
	d.Site.Domain = "a.example"
	if d.SIP.EffectiveRealm(d.Site) != "a.example" {
		t.Error("realm default")
	}
	r := d.SIP.Registrar
	if r.EffectiveAuthFailLimit() != 10 || r.EffectiveStormRate() != 2000 ||
		r.EffectiveRetryAfter() != 5*time.Second || r.EffectivePersistInterval() != time.Second {
		t.Error("registrar defaults")
	}
	if (Registrar{StormRate: -1}).EffectiveStormRate() >= 0 {
		t.Error("storm_rate -1 must mean no limit (negative)")
	}
	h := d.HQ
	if h.EffectiveTransport() != "udp" || h.EffectiveOptionsInterval() != time.Second || h.EffectiveDownAfter() != 3 ||
		h.EffectiveUpAfter() != 3 || h.EffectiveHold() != 10*time.Second {
		t.Error("hq defaults")
	}
	if (Gateway{}).EffectiveTransport() != "udp" {
		t.Error("gateway transport default")
	}
	m := d.Media
	if m.EffectivePortMin() != 20000 || m.EffectivePortMax() != 29999 ||
		!slices.Equal(m.EffectiveCodecs(), []string{"PCMU", "PCMA", "telephone-event"}) {
		t.Error("media defaults")
	}
	s := d.MSR
	if s.EffectiveUsername() != "msr" || s.EffectivePassword() != "mediaserver" || s.EffectiveControlPort() != 5700 ||
		s.EffectiveHeaderPrefix() != "P-Eltex-MSR-" || s.EffectiveRegisterInterval() != 300*time.Second ||
		s.EffectiveRetryInterval() != 600*time.Second || !slices.Equal(s.EffectiveInterfaces(), []string{"*"}) ||
		s.EffectiveServiceInterface(WAN{Interface: "wan0"}) != "wan0" {
		t.Error("msr defaults")
	}
	if d.MediaResources.EffectivePerformance("x") != 1 {
		t.Error("performance default")
	}
	if _, ok := d.MediaResources.Distance("a", "b"); ok {
		t.Error("missing matrix entry must be forbidden")
	}
	if dist, ok := d.MediaResources.Distance("a", "a"); !ok || dist != 0 {
		t.Errorf("a site's own distance, missing from the matrix: %d %v, want 0", dist, ok)
	}
	// The defaulted slices are copies.
	d.SIP.Digest = []string{"SHA-256"}
	d.SIP.DigestAlgorithms()[0] = "x"
	if d.SIP.Digest[0] != "SHA-256" {
		t.Error("DigestAlgorithms returned the document's slice")
	}
}

func TestClone(t *testing.T) {
	d := loadFile(t, "testdata/valid/full.json")
	c := d.Clone()
	if !reflect.DeepEqual(c, d) {
		t.Fatal("clone differs")
	}
	// Mutate every reference in the clone; the original must not move.
	before := mustJSON(t, d)
	c.SIP.Listen[0] = "x"
	c.SIP.Digest[0] = "x"
	c.Users[0].Password = "x"
	c.HQ.DNSServers[0] = "x"
	c.PSTN.Gateways[0].Name = "x"
	c.PSTN.Emergency[0] = "x"
	c.Dialplan[1].Survivable.Route = "x"
	c.Inbound[0].To = "x"
	c.Media.Interfaces[0] = "x"
	c.Media.Codecs[0] = "x"
	c.MSR.Servers[0] = "x"
	c.MSR.Interfaces[0] = "x"
	c.MSR.ControlAllow[0] = "x"
	c.MediaResources.Matrix["full"]["hq"] = 99
	c.MediaResources.Matrix["new"] = nil
	c.MediaResources.Performance["msr-full"] = 9
	if mustJSON(t, d) != before {
		t.Error("mutating the clone changed the original")
	}
	if (*Document)(nil).Clone() != nil {
		t.Error("nil.Clone() != nil")
	}
	// nil stays nil, empty stays empty.
	e := &Document{Users: []User{}}
	if c := e.Clone(); c.Users == nil || c.Dialplan != nil {
		t.Error("Clone changed nil/empty slices")
	}
}

func TestErrorsFormat(t *testing.T) {
	errs := Errors{
		{Path: "users[3].extension", Message: "duplicate extension 1001 (also users[0])"},
		{Path: "sip.listen[0]", Message: "bad"},
		{Message: "empty document"},
	}
	want := "config: 3 errors: users[3].extension: duplicate extension 1001 (also users[0]); sip.listen[0]: bad; empty document"
	if errs.Error() != want {
		t.Errorf("got %q\nwant %q", errs.Error(), want)
	}
	if got := errs[:1].Error(); got != "config: 1 error: users[3].extension: duplicate extension 1001 (also users[0])" {
		t.Errorf("one error: %q", got)
	}
	if Errors(nil).Err() != nil || errs.Err() == nil {
		t.Error("Err")
	}
	if !slices.Equal(errs.Paths(), []string{"users[3].extension", "sip.listen[0]", ""}) {
		t.Error("Paths")
	}
	// The JSON shape of the HTTP 422 body.
	b, _ := json.Marshal(struct {
		Errors Errors `json:"errors"`
	}{errs[:1]})
	if string(b) != `{"errors":[{"path":"users[3].extension","message":"duplicate extension 1001 (also users[0])"}]}` {
		t.Errorf("JSON: %s", b)
	}
}

func TestLoadReturnsErrors(t *testing.T) {
	for _, in := range []string{`{`, `{"schema":2}`, `{"sip":{"lisen":[]}}`} {
		_, err := Load([]byte(in))
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Errorf("Load(%s): %T %v", in, err, err)
		}
		if !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("Load(%s): %v", in, err)
		}
	}
	// Parse alone does not validate.
	if _, err := Parse([]byte(`{"schema":2}`)); err != nil {
		t.Errorf("Parse: %v", err)
	}
	// null means "default" for any field.
	d, err := Parse([]byte(`{"schema":1,"sip":{"listen":null,"registrar":null},"users":null,"hq":null}`))
	if err != nil || d.SIP.Listen != nil || d.Users != nil {
		t.Errorf("Parse with nulls: %+v %v", d, err)
	}
}

// TestValidateDoesNotModify guards against validation with side effects.
func TestValidateDoesNotModify(t *testing.T) {
	d := loadFile(t, "testdata/valid/full.json")
	before := mustJSON(t, d)
	d.Validate()
	if mustJSON(t, d) != before {
		t.Error("Validate modified the document")
	}
}

// TestInboundFallThrough pins the inbound semantics that make the example
// valid: +78435550100 matches rule 0 first (→ "1000", no such user) and
// falls through to rule 1 (→ 1003).
func TestInboundFallThrough(t *testing.T) {
	d := loadFile(t, "../../examples/branch.json")
	d.Inbound = d.Inbound[:1]
	want := `inbound[0].to: DID rule produces unknown extension "1000" for +78435550100`
	if errs := d.Validate(); len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("got %v, want %s", errs, want)
	}
}
