package dialplan

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/outpost/outpost/mode"
)

// Route is where a call goes.
type Route string

// The routes.
const (
	RouteLocal Route = "local" // a branch user on this box
	RouteHQ    Route = "hq"    // the HQ pool
	RoutePSTN  Route = "pstn"  // the local PSTN gateway
)

func (r Route) valid() bool { return r == RouteLocal || r == RouteHQ || r == RoutePSTN }

// RuleEmergency is Decision.Rule for a number in Config.Emergency.
const RuleEmergency = "emergency"

// Rule is one outbound rule; rules are tried in order.
type Rule struct {
	Name    string // for Decision.Rule and messages; may be empty
	Match   string // Go regexp on the dialled number, used as written
	Route   Route
	Strip   int    // leading characters removed (≥ 0)
	Prepend string // added after Strip
	// Survivable, when set, replaces Route/Strip/Prepend in survivable
	// mode, and in standalone mode when Route is hq.
	Survivable *Alt
}

// Alt is a rule's survivable alternative.
type Alt struct {
	Route   Route
	Strip   int
	Prepend string
}

// Inbound maps a DID to an extension: To is expanded against the match of
// Match ($1, ${name}), as regexp.Regexp.ExpandString does.
type Inbound struct {
	Match, To string
}

// Config is everything the dial plan needs. Compile copies what it keeps.
type Config struct {
	Rules        []Rule
	Inbound      []Inbound
	Emergency    []string // always to the PSTN, unchanged, in every mode
	HQPSTNPrefix string   // survivable mode: prefix that turns an hq-routed number into E.164
	Extensions   []string // known local extensions (for Inbound)
}

// Decision is the outcome of Plan.Outbound.
type Decision struct {
	Number     string // the number as dialled
	Target     string // the number after strip/prepend; "" when there is no route
	Route      Route  // "" when there is no route
	Rule       string // name of the matched rule, RuleEmergency, or "" if none
	RuleIndex  int    // index of the matched rule; -1 when no rule matched (also for emergency numbers)
	Survivable bool   // a survivable alternative or the pstn_prefix fallback was used
	Emergency  bool   // the number is in Config.Emergency
	Explain    string // one human line saying why
}

// action is what a matched rule does in one mode, prepared by Compile.
type action struct {
	ok         bool
	route      Route
	strip      int
	prepend    string // for the pstn_prefix fallback: HQPSTNPrefix + the rule's prepend
	survivable bool
	desc       string // "; survivable mode: route pstn, strip 0, prepend \"+7\"" or the no-route reason
}

type rule struct {
	name string
	re   *regexp.Regexp
	head string // `rule 1 "hq" (^2\d{3}$) matched `
	act  [3]action
}

type inbound struct {
	re      *regexp.Regexp
	to      string
	literal bool // To has no '$': the result is To itself
}

// Plan is a compiled dial plan. It is immutable and safe for concurrent use.
type Plan struct {
	rules     []rule
	inbound   []inbound
	emergency []string
	exts      map[string]struct{}
}

var modeNames = [3]mode.Mode{mode.Normal, mode.Survivable, mode.Standalone}

func modeIndex(m mode.Mode) (int, bool) {
	switch m {
	case mode.Normal, "":
		return 0, true
	case mode.Survivable:
		return 1, true
	case mode.Standalone:
		return 2, true
	}
	return 0, false
}

// Compile checks cfg and prepares a Plan. Errors name the rule, e.g.
// `dialplan: rule 1 "hq": bad match: ...`.
func Compile(cfg Config) (*Plan, error) {
	p := &Plan{
		rules:     make([]rule, 0, len(cfg.Rules)),
		inbound:   make([]inbound, 0, len(cfg.Inbound)),
		emergency: make([]string, 0, len(cfg.Emergency)),
		exts:      make(map[string]struct{}, len(cfg.Extensions)),
	}
	for i, n := range cfg.Emergency {
		if n == "" {
			return nil, fmt.Errorf("dialplan: emergency[%d]: empty number", i)
		}
		if !slices.Contains(p.emergency, n) {
			p.emergency = append(p.emergency, n)
		}
	}
	for i, e := range cfg.Extensions {
		if e == "" {
			return nil, fmt.Errorf("dialplan: extension[%d]: empty", i)
		}
		p.exts[e] = struct{}{}
	}
	for i, r := range cfg.Rules {
		cr, err := compileRule(r, i, cfg.HQPSTNPrefix)
		if err != nil {
			name := ""
			if r.Name != "" {
				name = " " + strconv.Quote(r.Name)
			}
			return nil, fmt.Errorf("dialplan: rule %d%s: %w", i, name, err)
		}
		p.rules = append(p.rules, cr)
	}
	for i, in := range cfg.Inbound {
		re, err := regexp.Compile(in.Match)
		if err != nil {
			return nil, fmt.Errorf("dialplan: inbound %d: bad match: %w", i, err)
		}
		if in.To == "" {
			return nil, fmt.Errorf("dialplan: inbound %d: empty to", i)
		}
		p.inbound = append(p.inbound, inbound{re: re, to: in.To, literal: !containsDollar(in.To)})
	}
	return p, nil
}

func containsDollar(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '$' {
			return true
		}
	}
	return false
}

func checkAction(route Route, strip int) error {
	if !route.valid() {
		return fmt.Errorf("bad route %q (want local, hq or pstn)", string(route))
	}
	if strip < 0 {
		return fmt.Errorf("negative strip %d", strip)
	}
	return nil
}

func compileRule(r Rule, i int, hqPrefix string) (rule, error) {
	re, err := regexp.Compile(r.Match)
	if err != nil {
		return rule{}, fmt.Errorf("bad match: %w", err)
	}
	if err := checkAction(r.Route, r.Strip); err != nil {
		return rule{}, err
	}
	if alt := r.Survivable; alt != nil {
		if err := checkAction(alt.Route, alt.Strip); err != nil {
			return rule{}, fmt.Errorf("survivable: %w", err)
		}
	}
	head := "rule " + strconv.Itoa(i)
	if r.Name != "" {
		head += " " + strconv.Quote(r.Name)
	}
	head += " (" + r.Match + ") matched "
	cr := rule{name: r.Name, re: re, head: head}
	for mi, md := range modeNames {
		cr.act[mi] = plan(r, md, hqPrefix)
	}
	return cr, nil
}

func describe(route Route, strip int, prepend string) string {
	return "route " + string(route) + ", strip " + strconv.Itoa(strip) + ", prepend " + strconv.Quote(prepend)
}

func direct(m string, route Route, strip int, prepend string, survivable bool, label string) action {
	return action{ok: true, route: route, strip: strip, prepend: prepend, survivable: survivable,
		desc: "; " + m + " mode: " + label + describe(route, strip, prepend)}
}

func noRoute(m, why string) action { return action{desc: "; " + m + " mode: " + why + ": no route"} }

// plan decides, once per rule and mode, what a match does.
func plan(r Rule, md mode.Mode, hqPrefix string) action {
	m := string(md)
	alt := r.Survivable
	switch md {
	case mode.Survivable:
		route, strip, prepend, label := r.Route, r.Strip, r.Prepend, ""
		if alt != nil {
			route, strip, prepend = alt.Route, alt.Strip, alt.Prepend
			label = "survivable alternative routes hq, "
		}
		if route != RouteHQ {
			return direct(m, route, strip, prepend, alt != nil, "")
		}
		if hqPrefix == "" {
			return noRoute(m, label+"hq unreachable and pstn_prefix is empty")
		}
		return action{ok: true, route: RoutePSTN, strip: strip, prepend: hqPrefix + prepend, survivable: true,
			desc: "; " + m + " mode: " + label + "hq unreachable: pstn_prefix fallback: route pstn, strip " +
				strconv.Itoa(strip) + ", prepend pstn_prefix " + strconv.Quote(hqPrefix) + " + " + strconv.Quote(prepend)}
	case mode.Standalone:
		if r.Route != RouteHQ {
			return direct(m, r.Route, r.Strip, r.Prepend, false, "")
		}
		switch {
		case alt == nil:
			return noRoute(m, "no hq and no survivable alternative")
		case alt.Route == RouteHQ:
			return noRoute(m, "no hq, and the survivable alternative routes hq too")
		}
		return direct(m, alt.Route, alt.Strip, alt.Prepend, true, "no hq, survivable alternative: ")
	}
	return direct(m, r.Route, r.Strip, r.Prepend, false, "")
}

// stripChars removes n leading characters (runes) of s.
func stripChars(s string, n int) string {
	for i := 0; i < n; i++ {
		if s == "" {
			return ""
		}
		if s[0] < utf8.RuneSelf {
			s = s[1:]
			continue
		}
		_, size := utf8.DecodeRuneInString(s)
		s = s[size:]
	}
	return s
}

// Outbound decides the route of a call to number in mode. ok is false when
// the call cannot be routed (the B2BUA answers 404/484); the Decision then
// still carries Number, the matched rule (if any) and an Explain line.
func (p *Plan) Outbound(number string, md mode.Mode) (Decision, bool) {
	d := Decision{Number: number, RuleIndex: -1}
	if slices.Contains(p.emergency, number) {
		d.Target, d.Route, d.Rule, d.Emergency = number, RoutePSTN, RuleEmergency, true
		d.Explain = "emergency number " + number + ": route pstn unchanged, in every mode -> " + number
		return d, true
	}
	mi, known := modeIndex(md)
	if !known {
		d.Explain = "unknown mode " + strconv.Quote(string(md)) + ": no route for " + number
		return d, false
	}
	for i := range p.rules {
		r := &p.rules[i]
		if !r.re.MatchString(number) {
			continue
		}
		d.Rule, d.RuleIndex = r.name, i
		a := &r.act[mi]
		if !a.ok {
			d.Explain = r.head + number + a.desc
			return d, false
		}
		rest := stripChars(number, a.strip)
		if rest == "" {
			d.Explain = r.head + number + a.desc + ": strip leaves nothing of " +
				strconv.Itoa(utf8.RuneCountInString(number)) + " characters: no route"
			return d, false
		}
		d.Target = rest
		if a.prepend != "" {
			d.Target = a.prepend + rest
		}
		d.Route, d.Survivable = a.route, a.survivable
		d.Explain = r.head + number + a.desc + " -> " + d.Target
		return d, true
	}
	d.Explain = "no rule matched " + number + " (" + string(modeNames[mi]) + " mode)"
	return d, false
}

// InboundDID maps a DID called from the PSTN to a known extension: the first
// rule (in order) whose regexp matches did and whose expanded To is a known
// extension wins; rule is its index. ok is false (rule -1) when no rule
// yields a known extension.
func (p *Plan) InboundDID(did string) (ext string, rule int, ok bool) {
	for i := range p.inbound {
		in := &p.inbound[i]
		if in.literal {
			if !in.re.MatchString(did) {
				continue
			}
			if _, known := p.exts[in.to]; known {
				return in.to, i, true
			}
			continue
		}
		m := in.re.FindStringSubmatchIndex(did)
		if m == nil {
			continue
		}
		b := in.re.ExpandString(nil, in.to, did, m)
		if _, known := p.exts[string(b)]; known { // no allocation for the lookup
			return string(b), i, true
		}
	}
	return "", -1, false
}
