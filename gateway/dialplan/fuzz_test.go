package dialplan

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outpost/outpost/mode"
)

// FuzzOutbound runs random dialled numbers through the example plan in every
// mode: Outbound never panics, is deterministic, agrees with a naive
// first-match search, and its Decision fields are consistent.
func FuzzOutbound(f *testing.F) {
	cfg := exampleConfig(f)
	p, err := Compile(cfg)
	if err != nil {
		f.Fatal(err)
	}
	res := make([]*regexp.Regexp, len(cfg.Rules))
	for i, r := range cfg.Rules {
		res[i] = regexp.MustCompile(r.Match)
	}
	for _, s := range []string{"1001", "2001", "112", "88435550101", "+74951234567", "", "8", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, number string) {
		first := slices.IndexFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(number) })
		emergency := slices.Contains(cfg.Emergency, number)
		for _, md := range []mode.Mode{mode.Normal, mode.Survivable, mode.Standalone} {
			d, ok := p.Outbound(number, md)
			if again, ok2 := p.Outbound(number, md); again != d || ok2 != ok {
				t.Fatalf("not deterministic: %+v, %v then %+v, %v", d, ok, again, ok2)
			}
			bad := func(why string) { t.Fatalf("%s: Outbound(%q, %q) = %+v, %v", why, number, md, d, ok) }
			if d.Number != number {
				bad("Number differs")
			}
			if d.Explain == "" {
				bad("empty Explain")
			}
			if d.Emergency != emergency {
				bad("Emergency wrong")
			}
			if emergency {
				if !ok || d.Route != RoutePSTN || d.Target != number || d.Rule != RuleEmergency || d.RuleIndex != -1 || d.Survivable {
					bad("emergency not routed to pstn unchanged")
				}
				continue
			}
			if d.RuleIndex != first {
				bad("RuleIndex is not the first matching rule")
			}
			if first >= 0 && d.Rule != cfg.Rules[first].Name || first < 0 && d.Rule != "" {
				bad("Rule does not name RuleIndex")
			}
			if !ok {
				if d.Route != "" || d.Target != "" || d.Survivable {
					bad("no route but Route/Target/Survivable set")
				}
				continue
			}
			if first < 0 || d.Target == "" || !d.Route.valid() || !strings.HasSuffix(d.Explain, " -> "+d.Target) {
				bad("inconsistent route")
			}
			if md != mode.Normal && d.Route == RouteHQ {
				bad("hq route outside normal md")
			}
			if md == mode.Normal && d.Survivable {
				bad("Survivable in normal md")
			}
			r := cfg.Rules[first]
			route, strip, prepend := r.Route, r.Strip, r.Prepend
			if d.Survivable && r.Survivable != nil {
				route, strip, prepend = r.Survivable.Route, r.Survivable.Strip, r.Survivable.Prepend
			}
			if d.Route != route && !(route == RouteHQ && d.Survivable && d.Route == RoutePSTN) {
				bad("route is neither the rule's nor the pstn_prefix fallback")
			}
			rest := number
			for range strip {
				_, size := utf8.DecodeRuneInString(rest)
				rest = rest[size:]
			}
			if want := prepend + rest; !strings.HasSuffix(d.Target, want) {
				bad("Target is not strip/prepend of the number (want suffix " + want + ")")
			}
		}
	})
}
