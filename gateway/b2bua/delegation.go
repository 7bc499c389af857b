package b2bua

import (
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// Boss is a user with delegates (boss–delegate, or executive–assistant):
// a call to the boss rings the boss's phones and the delegates' (after
// After; 0 = at once, and at once too when the boss's phones cannot
// ring: none registered, all refused, or DND), and a delegate can call
// as the boss by dialling onBehalfCode before the number.
type Boss struct {
	Extension string
	Name      string // the boss's display name, for calls on the boss's behalf
	Delegates []string
	After     time.Duration
	// Identity is how a call on the boss's behalf shows the boss:
	// IdentityFrom (From and P-Asserted-Identity) or IdentityPAI
	// (P-Asserted-Identity only; From stays the delegate's).
	Identity string
}

// Identities of a call on a boss's behalf.
const (
	IdentityFrom = "from"
	IdentityPAI  = "pai"
)

// onBehalfCode, then a number: a delegate's call to it as the boss.
const onBehalfCode = "*33"

// bossesOf indexes the bosses by extension, and the first boss of each
// delegate (in the configured order) by the delegate's extension.
func bossesOf(bs []Boss) (byBoss, byDelegate map[string]*Boss) {
	byBoss, byDelegate = map[string]*Boss{}, map[string]*Boss{}
	for i := range bs {
		b := &bs[i]
		byBoss[b.Extension] = b
		for _, d := range b.Delegates {
			if _, ok := byDelegate[d]; !ok {
				byDelegate[d] = b
			}
		}
	}
	return byBoss, byDelegate
}

// delegateTargets are the targets of boss ext's delegates, held back by
// the boss's After unless now (the boss's phones do not ring): not the
// caller, nor a delegate in a call or in do-not-disturb.
func (c *call) delegateTargets(ext string, now bool) []target {
	boss, ok := c.set.bosses[ext]
	if !ok {
		return nil
	}
	var ts []target
	for _, d := range boss.Delegates {
		if d == c.info.From || c.b.inCall(d, c) || c.set.services(d).DND {
			continue
		}
		dts, _ := c.b.targets(c.ring, c.set, dialplan.Decision{Route: dialplan.RouteLocal, Target: d})
		for i := range dts {
			if !now {
				dts[i].delay = boss.After
			}
		}
		ts = append(ts, dts...)
	}
	return ts
}

// onBehalf reads a delegate's call to onBehalfCode+number: the number
// and the boss it is made for. ok is false when number does not start
// with the code; boss is nil when the caller is nobody's delegate.
func (s *Settings) onBehalf(caller, number string) (rest string, boss *Boss, ok bool) {
	rest, ok = strings.CutPrefix(number, onBehalfCode)
	if !ok {
		return number, nil, false
	}
	return rest, s.delegateOf[caller], true
}

// behalfIdentity puts the boss's identity on a call made on its behalf:
// the From (IdentityFrom) and a P-Asserted-Identity (RFC 3325).
func (b *Boss) behalfIdentity(s *dialSpec, host string) {
	if b.Identity != IdentityPAI {
		s.from.DisplayName, s.from.Address.User = b.Name, b.Extension
	}
	pai := "<sip:" + b.Extension + "@" + host + ">"
	if b.Name != "" {
		pai = `"` + strings.ReplaceAll(b.Name, `"`, "") + `" ` + pai
	}
	s.headers = append(s.headers, sip.NewHeader("P-Asserted-Identity", pai))
}
