package dialplan

import (
	"encoding/json"
	"errors"
	"os"
	"regexp/syntax"
	"strings"
	"sync"
	"testing"

	"github.com/outpost/outpost/mode"
)

// exampleConfig reads the dial plan parts of examples/branch.json (the
// normative example document) the way the appliance translates them.
func exampleConfig(tb testing.TB) Config {
	tb.Helper()
	raw, err := os.ReadFile("../../examples/branch.json")
	if err != nil {
		tb.Fatal(err)
	}
	var doc struct {
		Users []struct {
			Extension string `json:"extension"`
		} `json:"users"`
		HQ struct {
			PSTNPrefix string `json:"pstn_prefix"`
		} `json:"hq"`
		PSTN struct {
			Emergency []string `json:"emergency"`
		} `json:"pstn"`
		Dialplan []Rule    `json:"dialplan"` // keys match the fields case-insensitively
		Inbound  []Inbound `json:"inbound"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		tb.Fatal(err)
	}
	cfg := Config{
		Rules:        doc.Dialplan,
		Inbound:      doc.Inbound,
		Emergency:    doc.PSTN.Emergency,
		HQPSTNPrefix: doc.HQ.PSTNPrefix,
	}
	for _, u := range doc.Users {
		cfg.Extensions = append(cfg.Extensions, u.Extension)
	}
	return cfg
}

func examplePlan(tb testing.TB) *Plan {
	tb.Helper()
	p, err := Compile(exampleConfig(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

type outCase struct {
	name      string
	number    string
	md        mode.Mode
	ok        bool
	route     Route
	target    string
	rule      string
	index     int
	surv      bool
	emergency bool
	explain   string // exact when it starts with "=", else a substring
}

func checkDecision(t *testing.T, p *Plan, c outCase) {
	t.Helper()
	d, ok := p.Outbound(c.number, c.md)
	if ok != c.ok || d.Route != c.route || d.Target != c.target || d.Rule != c.rule ||
		d.RuleIndex != c.index || d.Survivable != c.surv || d.Emergency != c.emergency || d.Number != c.number {
		t.Errorf("Outbound(%q, %q) = %+v, %v\nwant ok=%v route=%q target=%q rule=%q index=%d survivable=%v emergency=%v",
			c.number, c.md, d, ok, c.ok, c.route, c.target, c.rule, c.index, c.surv, c.emergency)
	}
	if d.Explain == "" {
		t.Errorf("Outbound(%q, %q): empty Explain", c.number, c.md)
	}
	if want, exact := strings.CutPrefix(c.explain, "="); exact {
		if d.Explain != want {
			t.Errorf("Outbound(%q, %q).Explain =\n  %s\nwant\n  %s", c.number, c.md, d.Explain, want)
		}
	} else if !strings.Contains(d.Explain, c.explain) {
		t.Errorf("Outbound(%q, %q).Explain = %q, want it to contain %q", c.number, c.md, d.Explain, c.explain)
	}
}

func TestOutboundExample(t *testing.T) {
	p := examplePlan(t)
	const (
		local, hq, pstn = RouteLocal, RouteHQ, RoutePSTN
		N, S, A         = mode.Normal, mode.Survivable, mode.Standalone
	)
	cases := []outCase{
		// normal
		{"branch", "1001", N, true, local, "1001", "branch", 0, false, false,
			`=rule 0 "branch" (^1\d{3}$) matched 1001; normal mode: route local, strip 0, prepend "" -> 1001`},
		{"hq", "2001", N, true, hq, "2001", "hq", 1, false, false,
			`=rule 1 "hq" (^2\d{3}$) matched 2001; normal mode: route hq, strip 0, prepend "" -> 2001`},
		{"national", "88435550101", N, true, pstn, "+78435550101", "national", 3, false, false,
			`=rule 3 "national" (^8\d{10}$) matched 88435550101; normal mode: route pstn, strip 1, prepend "+7" -> +78435550101`},
		{"e164", "+74951234567", N, true, pstn, "+74951234567", "e164", 4, false, false, "-> +74951234567"},
		{"emergency 112", "112", N, true, pstn, "112", RuleEmergency, -1, false, true,
			"=emergency number 112: route pstn unchanged, in every mode -> 112"},
		{"emergency 911", "911", N, true, pstn, "911", RuleEmergency, -1, false, true, "emergency number 911"},
		{"no match", "5555", N, false, "", "", "", -1, false, false, "=no rule matched 5555 (normal mode)"},
		{"empty", "", N, false, "", "", "", -1, false, false, "no rule matched"},
		{"too long ext", "10011", N, false, "", "", "", -1, false, false, "no rule matched"},
		{"zero mode is normal", "2001", "", true, hq, "2001", "hq", 1, false, false, "normal mode"},

		// survivable: the hq rule's alternative; the rest unchanged
		{"branch", "1001", S, true, local, "1001", "branch", 0, false, false, "survivable mode: route local"},
		{"hq alternative", "2001", S, true, pstn, "+74955552001", "hq", 1, true, false,
			`=rule 1 "hq" (^2\d{3}$) matched 2001; survivable mode: route pstn, strip 0, prepend "+7495555" -> +74955552001`},
		{"national", "88435550101", S, true, pstn, "+78435550101", "national", 3, false, false, "strip 1"},
		{"e164", "+74951234567", S, true, pstn, "+74951234567", "e164", 4, false, false, "survivable mode"},
		{"emergency 112", "112", S, true, pstn, "112", RuleEmergency, -1, false, true, "emergency"},
		{"emergency 911", "911", S, true, pstn, "911", RuleEmergency, -1, false, true, "emergency"},
		{"no match", "5555", S, false, "", "", "", -1, false, false, "=no rule matched 5555 (survivable mode)"},

		// standalone: no hq; the hq rule uses its alternative
		{"branch", "1001", A, true, local, "1001", "branch", 0, false, false, "standalone mode: route local"},
		{"hq alternative", "2001", A, true, pstn, "+74955552001", "hq", 1, true, false,
			`=rule 1 "hq" (^2\d{3}$) matched 2001; standalone mode: no hq, survivable alternative: route pstn, strip 0, prepend "+7495555" -> +74955552001`},
		{"national", "88435550101", A, true, pstn, "+78435550101", "national", 3, false, false, "standalone"},
		{"e164", "+74951234567", A, true, pstn, "+74951234567", "e164", 4, false, false, "standalone"},
		{"emergency 112", "112", A, true, pstn, "112", RuleEmergency, -1, false, true, "emergency"},
		{"emergency 911", "911", A, true, pstn, "911", RuleEmergency, -1, false, true, "emergency"},
		{"no match", "+7", A, false, "", "", "", -1, false, false, "standalone mode"},

		{"unknown mode", "2001", "failback", false, "", "", "", -1, false, false, `=unknown mode "failback": no route for 2001`},
		{"emergency in unknown mode", "112", "failback", true, pstn, "112", RuleEmergency, -1, false, true, "emergency"},
	}
	for _, c := range cases {
		t.Run(string(c.md)+"/"+c.name, func(t *testing.T) { checkDecision(t, p, c) })
	}
}

func TestOutboundRules(t *testing.T) {
	const (
		local, hq, pstn = RouteLocal, RouteHQ, RoutePSTN
		N, S, A         = mode.Normal, mode.Survivable, mode.Standalone
	)
	rules := []Rule{
		{Name: "hq4", Match: `^4\d{3}$`, Route: hq, Strip: 1, Prepend: "9"},
		{Match: `^\*\d*$`, Route: pstn, Strip: 3}, // unnamed, strips
		{Name: "altHQ", Match: `^5\d{2}$`, Route: local, Survivable: &Alt{Route: hq, Strip: 1, Prepend: "77"}},
		{Name: "localAlt", Match: `^6\d{2}$`, Route: local, Survivable: &Alt{Route: pstn, Prepend: "+7843555"}},
		{Name: "first", Match: `^7`, Route: local},
		{Name: "second", Match: `^7\d$`, Route: pstn},
		{Name: "emergency", Match: `^112$`, Route: local}, // not an emergency number here
		{Name: "hqAltHQ", Match: `^3\d{2}$`, Route: hq, Survivable: &Alt{Route: hq}},
		{Name: "unicode", Match: `^ü\d+$`, Route: local, Strip: 1},
		{Name: "bigstrip", Match: `^0\d*$`, Route: pstn, Strip: 1, Prepend: "+"},
	}
	withPrefix, err := Compile(Config{Rules: rules, HQPSTNPrefix: "+7495555"})
	if err != nil {
		t.Fatal(err)
	}
	noPrefix, err := Compile(Config{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	cases := []outCase{
		{"strip+prepend", "4123", N, true, hq, "9123", "hq4", 0, false, false, `strip 1, prepend "9" -> 9123`},
		{"hq fallback via prefix", "4123", S, true, pstn, "+74955559123", "hq4", 0, true, false,
			`=rule 0 "hq4" (^4\d{3}$) matched 4123; survivable mode: hq unreachable: pstn_prefix fallback: route pstn, strip 1, prepend pstn_prefix "+7495555" + "9" -> +74955559123`},
		{"standalone hq without alternative", "4123", A, false, "", "", "hq4", 0, false, false,
			`=rule 0 "hq4" (^4\d{3}$) matched 4123; standalone mode: no hq and no survivable alternative: no route`},
		{"unnamed strip", "*1234", N, true, pstn, "34", "", 1, false, false, `=rule 1 (^\*\d*$) matched *1234; normal mode: route pstn, strip 3, prepend "" -> 34`},
		{"strip equal to length", "*12", N, false, "", "", "", 1, false, false, "strip leaves nothing of 3 characters: no route"},
		{"strip beyond length", "*1", S, false, "", "", "", 1, false, false, "strip leaves nothing of 2 characters: no route"},
		{"strip beyond length with prepend", "0", N, false, "", "", "bigstrip", 9, false, false, "strip leaves nothing"},
		{"strip with prepend", "0123", N, true, pstn, "+123", "bigstrip", 9, false, false, "-> +123"},
		{"alternative routes hq: normal", "512", N, true, local, "512", "altHQ", 2, false, false, "normal mode: route local"},
		{"alternative routes hq: survivable fallback", "512", S, true, pstn, "+74955557712", "altHQ", 2, true, false,
			`survivable mode: survivable alternative routes hq, hq unreachable: pstn_prefix fallback: route pstn, strip 1, prepend pstn_prefix "+7495555" + "77" -> +74955557712`},
		{"alternative routes hq: standalone keeps primary", "512", A, true, local, "512", "altHQ", 2, false, false, "standalone mode: route local"},
		{"local rule alternative: survivable", "612", S, true, pstn, "+7843555612", "localAlt", 3, true, false, "survivable mode: route pstn"},
		{"local rule alternative: standalone keeps primary", "612", A, true, local, "612", "localAlt", 3, false, false, "standalone mode: route local"},
		{"first rule wins", "71", N, true, local, "71", "first", 4, false, false, `rule 4 "first"`},
		{"rule named emergency is a rule", "112", S, true, local, "112", "emergency", 6, false, false, `rule 6 "emergency"`},
		{"hq alt hq: survivable", "301", S, true, pstn, "+7495555301", "hqAltHQ", 7, true, false, "pstn_prefix fallback"},
		{"hq alt hq: standalone", "301", A, false, "", "", "hqAltHQ", 7, false, false, "survivable alternative routes hq too: no route"},
		{"strip counts characters", "ü42", N, true, local, "42", "unicode", 8, false, false, "-> 42"},
	}
	for _, c := range cases {
		t.Run(string(c.md)+"/"+c.name, func(t *testing.T) { checkDecision(t, withPrefix, c) })
	}
	noPrefixCases := []outCase{
		{"hq fallback without prefix", "4123", S, false, "", "", "hq4", 0, false, false,
			`=rule 0 "hq4" (^4\d{3}$) matched 4123; survivable mode: hq unreachable and pstn_prefix is empty: no route`},
		{"alternative routes hq without prefix", "512", S, false, "", "", "altHQ", 2, false, false,
			"survivable alternative routes hq, hq unreachable and pstn_prefix is empty: no route"},
		{"normal unaffected", "4123", N, true, hq, "9123", "hq4", 0, false, false, "route hq"},
	}
	for _, c := range noPrefixCases {
		t.Run("noprefix/"+string(c.md)+"/"+c.name, func(t *testing.T) { checkDecision(t, noPrefix, c) })
	}
}

// TestEmergencyEveryMode: emergency numbers beat every rule in every mode,
// even a rule that would send them elsewhere.
func TestEmergencyEveryMode(t *testing.T) {
	p, err := Compile(Config{
		Rules: []Rule{
			{Name: "all-local", Match: `.*`, Route: RouteLocal, Strip: 1, Prepend: "x"},
			{Name: "hq", Match: `^1`, Route: RouteHQ},
		},
		Emergency: []string{"112", "911", "01", "112"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range []mode.Mode{mode.Normal, mode.Survivable, mode.Standalone, "", "bogus"} {
		for _, n := range []string{"112", "911", "01"} {
			checkDecision(t, p, outCase{"", n, md, true, RoutePSTN, n, RuleEmergency, -1, false, true, "emergency number " + n})
		}
		// near misses are not emergency numbers
		if d, _ := p.Outbound("1120", md); d.Emergency {
			t.Errorf("1120 in %q mode treated as emergency: %+v", md, d)
		}
	}
}

func TestInboundDID(t *testing.T) {
	p := examplePlan(t)
	cases := []struct {
		did  string
		ext  string
		rule int
		ok   bool
	}{
		{"+78435550100", "1003", 1, true}, // rule 0 makes "1000" (unknown): falls through
		{"+78435550101", "1001", 0, true},
		{"+78435550102", "1002", 0, true},
		{"+78435550199", "", -1, false}, // rule 0 makes "1099" (unknown), rule 1 does not match
		{"+74955550100", "", -1, false},
		{"78435550101", "", -1, false},
		{"", "", -1, false},
	}
	for _, c := range cases {
		ext, rule, ok := p.InboundDID(c.did)
		if ext != c.ext || rule != c.rule || ok != c.ok {
			t.Errorf("InboundDID(%q) = %q, %d, %v; want %q, %d, %v", c.did, ext, rule, ok, c.ext, c.rule, c.ok)
		}
	}
}

// TestInboundExpandsMatchOnly: To is expanded against the match alone, not
// substituted into the rest of the DID (the rule below is unanchored).
func TestInboundExpandsMatchOnly(t *testing.T) {
	p, err := Compile(Config{
		Inbound:    []Inbound{{Match: `(\d{3})$`, To: "$1"}, {Match: `^\+7(?P<city>\d{3})`, To: "${city}0"}},
		Extensions: []string{"101", "8430"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for did, want := range map[string]string{"+78435550101": "101", "+78435550999": "8430"} {
		if ext, _, ok := p.InboundDID(did); !ok || ext != want {
			t.Errorf("InboundDID(%q) = %q, %v; want %q", did, ext, ok, want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	good := Rule{Name: "ok", Match: `^1$`, Route: RouteLocal}
	cases := []struct {
		name string
		cfg  Config
		want string // prefix
	}{
		{"bad match", Config{Rules: []Rule{good, {Name: "hq", Match: `^2(\d{3}$`, Route: RouteHQ}}},
			`dialplan: rule 1 "hq": bad match: error parsing regexp: missing closing ): `},
		{"unnamed bad match", Config{Rules: []Rule{{Match: `[`, Route: RouteHQ}}}, `dialplan: rule 0: bad match: `},
		{"bad route", Config{Rules: []Rule{{Name: "x", Match: `^1$`, Route: "sip"}}},
			`dialplan: rule 0 "x": bad route "sip" (want local, hq or pstn)`},
		{"empty route", Config{Rules: []Rule{{Name: "x", Match: `^1$`}}}, `dialplan: rule 0 "x": bad route ""`},
		{"negative strip", Config{Rules: []Rule{good, good, {Name: "n", Match: `^1$`, Route: RoutePSTN, Strip: -1}}},
			`dialplan: rule 2 "n": negative strip -1`},
		{"bad alternative route", Config{Rules: []Rule{{Name: "a", Match: `^1$`, Route: RouteHQ, Survivable: &Alt{Route: "PSTN"}}}},
			`dialplan: rule 0 "a": survivable: bad route "PSTN"`},
		{"negative alternative strip", Config{Rules: []Rule{{Name: "a", Match: `^1$`, Route: RouteHQ, Survivable: &Alt{Route: RoutePSTN, Strip: -2}}}},
			`dialplan: rule 0 "a": survivable: negative strip -2`},
		{"bad inbound", Config{Inbound: []Inbound{{Match: `(?P<>x)`, To: "1"}}}, `dialplan: inbound 0: bad match: `},
		{"empty inbound to", Config{Inbound: []Inbound{{Match: `^1$`}}}, `dialplan: inbound 0: empty to`},
		{"empty emergency", Config{Emergency: []string{"112", ""}}, `dialplan: emergency[1]: empty number`},
		{"empty extension", Config{Extensions: []string{""}}, `dialplan: extension[0]: empty`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compile(c.cfg)
			if err == nil || p != nil {
				t.Fatalf("Compile = %v, %v; want error %q", p, err, c.want)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error %q, want prefix %q", err, c.want)
			}
		})
	}
	_, err := Compile(Config{Rules: []Rule{{Match: `(`, Route: RouteLocal}}})
	var se *syntax.Error
	if !errors.As(err, &se) {
		t.Errorf("bad match error %v does not wrap *syntax.Error", err)
	}
}

func TestCompileEmpty(t *testing.T) {
	p, err := Compile(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := p.Outbound("1001", mode.Normal); ok || d.RuleIndex != -1 {
		t.Errorf("empty plan routed: %+v", d)
	}
	if _, _, ok := p.InboundDID("+78435550101"); ok {
		t.Error("empty plan mapped a DID")
	}
}

// TestCompileCopies: the Plan does not share the caller's slices.
func TestCompileCopies(t *testing.T) {
	cfg := exampleConfig(t)
	p, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Rules[0].Route, cfg.Rules[1].Survivable.Prepend = RoutePSTN, "0"
	cfg.Emergency[0], cfg.Extensions[0] = "999", "9999"
	cfg.Inbound[0].To = "9999"
	if d, _ := p.Outbound("1001", mode.Normal); d.Route != RouteLocal {
		t.Errorf("rule changed after Compile: %+v", d)
	}
	if d, _ := p.Outbound("2001", mode.Survivable); d.Target != "+74955552001" {
		t.Errorf("alternative changed after Compile: %+v", d)
	}
	if d, _ := p.Outbound("112", mode.Normal); !d.Emergency {
		t.Errorf("emergency list changed after Compile: %+v", d)
	}
	if ext, _, _ := p.InboundDID("+78435550101"); ext != "1001" {
		t.Errorf("inbound changed after Compile: %q", ext)
	}
}

func TestConcurrent(t *testing.T) {
	p := examplePlan(t)
	numbers := []string{"1001", "2001", "112", "88435550101", "+74951234567", "5555"}
	want := make(map[string]Decision)
	for _, n := range numbers {
		want[n], _ = p.Outbound(n, mode.Survivable)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 500 {
				n := numbers[i%len(numbers)]
				if d, _ := p.Outbound(n, mode.Survivable); d != want[n] {
					t.Errorf("Outbound(%q) = %+v, want %+v", n, d, want[n])
					return
				}
				p.InboundDID("+78435550100")
			}
		})
	}
	wg.Wait()
}

func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	p := examplePlan(t)
	for _, c := range []struct {
		number string
		md     mode.Mode
		max    float64
	}{
		{"1001", mode.Normal, 1},             // Explain only; Target is the number itself
		{"2001", mode.Survivable, 2},         // Target and Explain
		{"88435550101", mode.Standalone, 2},  // Target and Explain
		{"112", mode.Survivable, 1},          // Explain
		{"+74951234567", mode.Survivable, 1}, // last rule
	} {
		if n := testing.AllocsPerRun(100, func() { p.Outbound(c.number, c.md) }); n > c.max {
			t.Errorf("Outbound(%q, %q): %v allocs, want ≤ %v", c.number, c.md, n, c.max)
		}
	}
	if n := testing.AllocsPerRun(100, func() { p.InboundDID("+78435550101") }); n > 3 {
		t.Errorf("InboundDID: %v allocs, want ≤ 3", n)
	}
}
