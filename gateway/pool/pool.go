package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/rendezvous"
	"github.com/outpost/outpost/siptarget"
)

// Member is one box of the pool.
type Member struct {
	Name   string
	Target siptarget.Target // where its phones and the other members reach it
}

// Config is the pool section as the gateway runs it. Zero tuning fields
// mean the health package's defaults (Hold: 10 s).
type Config struct {
	Self    string
	Members []Member
	// Domain makes a user's hash key "sip:EXT@Domain" (site.domain): the
	// same on every member.
	Domain    string
	Interval  time.Duration
	DownAfter int
	UpAfter   int
	Hold      time.Duration
	Secret    string
}

// DefaultHold is Config.Hold when zero.
const DefaultHold = 10 * time.Second

// Check reports a configuration the pool cannot run (appliance/config
// refuses it first).
func (c Config) Check() error {
	switch {
	case len(c.Members) < 2:
		return errors.New("pool: fewer than two members")
	case !slices.ContainsFunc(c.Members, func(m Member) bool { return m.Name == c.Self }):
		return fmt.Errorf("pool: self %q is not a member", c.Self)
	case c.Secret == "":
		return errors.New("pool: no secret")
	}
	return nil
}

func (c Config) hold() time.Duration {
	if c.Hold <= 0 {
		return DefaultHold
	}
	return c.Hold
}

// Pool is one member's view of the pool. It is safe for concurrent use.
type Pool struct {
	cfg    Config
	names  []string
	byName map[string]Member
	tr     *health.Tracker
	now    func() time.Time
}

// Option adjusts a Pool for tests.
type Option func(*health.Config)

// WithClock injects the clock of the health tracker and the hold.
func WithClock(now func() time.Time) Option { return func(h *health.Config) { h.Now = now } }

// New returns the Pool of cfg; every other member starts up (as the
// health tracker's unknown targets do) until its probes say otherwise.
func New(cfg Config, opts ...Option) (*Pool, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	hc := health.Config{DownAfter: cfg.DownAfter, UpAfter: cfg.UpAfter, Interval: cfg.Interval}
	for _, o := range opts {
		o(&hc)
	}
	p := &Pool{cfg: cfg, byName: make(map[string]Member, len(cfg.Members)), tr: health.New(hc)}
	p.now = p.tr.Config().Now
	for _, m := range cfg.Members {
		p.names = append(p.names, m.Name)
		p.byName[m.Name] = m
		if m.Name != cfg.Self {
			p.tr.Track(m.Target.String())
		}
	}
	return p, nil
}

// Config is the configuration the Pool runs.
func (p *Pool) Config() Config { return p.cfg }

// Self is this box.
func (p *Pool) Self() Member { return p.byName[p.cfg.Self] }

// Key is the hash key of extension ext: its address of record.
func (p *Pool) Key(ext string) string { return "sip:" + ext + "@" + p.cfg.Domain }

// Order is ext's members, primary first (the same on every member).
func (p *Pool) Order(ext string) []Member {
	names := rendezvous.Order(p.Key(ext), p.names)
	out := make([]Member, len(names))
	for i, n := range names {
		out[i] = p.byName[n]
	}
	return out
}

// states is the health of the other members by target.
func (p *Pool) states() map[string]health.TargetState {
	snap := p.tr.Snapshot()
	out := make(map[string]health.TargetState, len(snap))
	for _, s := range snap {
		out[s.Target] = s
	}
	return out
}

// serving reports whether m may be a user's home: this box, or up and —
// when it came back up after being down — up for Hold since.
func (p *Pool) serving(m Member, st map[string]health.TargetState, now time.Time) bool {
	if m.Name == p.cfg.Self {
		return true
	}
	s, ok := st[m.Target.String()]
	if !ok {
		return true
	}
	return Serving(s, p.cfg.hold(), now)
}

// Serving is the home rule for one member's health state: up, and not
// within Hold of a recovery.
func Serving(s health.TargetState, hold time.Duration, now time.Time) bool {
	if !s.Up {
		return false
	}
	return s.Reason != health.ReasonProbesOK || now.Sub(s.LastChange) >= hold
}

// Home is ext's home: the first serving member of its order.
func (p *Pool) Home(ext string) Member {
	st, now := p.states(), p.now()
	order := p.Order(ext)
	for _, m := range order {
		if p.serving(m, st, now) {
			return m
		}
	}
	return p.Self() // unreachable: this box always serves
}

// Redirect reports where a REGISTER for ext must go instead of here: its
// home, when that is another member.
func (p *Pool) Redirect(ext string) (Member, bool) {
	h := p.Home(ext)
	return h, h.Name != p.cfg.Self
}

// Backup is ext's backup: the serving member after its home in its order
// (this box, when that is the next one), where its phone goes when the
// home fails; ok is false in a pool with no other serving member.
func (p *Pool) Backup(ext string) (Member, bool) {
	st, now := p.states(), p.now()
	home := false
	for _, m := range p.Order(ext) {
		if !p.serving(m, st, now) {
			continue
		}
		if home {
			return m, true
		}
		home = true
	}
	return Member{}, false
}

// Peers are the other members that are up, in ext's order: where a call
// to ext goes when this box holds no binding for it (one of them may hold
// it: its home, or a backup until the phone's next refresh).
func (p *Pool) Peers(ext string) []Member {
	st := p.states()
	var out []Member
	for _, m := range p.Order(ext) {
		if m.Name == p.cfg.Self {
			continue
		}
		if s, ok := st[m.Target.String()]; ok && !s.Up {
			continue
		}
		out = append(out, m)
	}
	return out
}

// MemberAt is the member whose target is t, by transport and address
// (over UDP the exact ip:port, over TCP the IP: see gateway/trust.go).
func (p *Pool) MemberAt(tr siptarget.Transport, addr string) (Member, bool) {
	for _, m := range p.cfg.Members {
		if m.Name == p.cfg.Self || m.Target.Transport != tr {
			continue
		}
		if m.Target.HostPort() == addr {
			return m, true
		}
		if tr != siptarget.UDP {
			if host, _, ok := cutPort(addr); ok && host == m.Target.Addr.String() {
				return m, true
			}
		}
	}
	return Member{}, false
}

// MemberStatus is one member in Status.
type MemberStatus struct {
	Name    string `json:"name"`
	Target  string `json:"target"`
	Self    bool   `json:"self,omitempty"`
	Up      bool   `json:"up"`
	Serving bool   `json:"serving"` // may be a home: up and past the hold after a recovery
	// Since is when its health last changed (zero for this box).
	Since  time.Time `json:"since,omitzero"`
	Reason string    `json:"reason,omitempty"`
}

// Members is the health of every member, in the document's order.
func (p *Pool) Members() []MemberStatus {
	st, now := p.states(), p.now()
	out := make([]MemberStatus, 0, len(p.cfg.Members))
	for _, m := range p.cfg.Members {
		ms := MemberStatus{Name: m.Name, Target: m.Target.String(), Self: m.Name == p.cfg.Self, Up: true, Serving: true}
		if s, ok := st[m.Target.String()]; ok && !ms.Self {
			ms.Up, ms.Serving, ms.Since, ms.Reason = s.Up, Serving(s, p.cfg.hold(), now), s.LastChange, string(s.Reason)
		}
		out = append(out, ms)
	}
	return out
}

// Run probes the other members with OPTIONS through ping until ctx ends.
func (p *Pool) Run(ctx context.Context, ping health.Pinger) error {
	pr := health.NewProber(p.tr, ping)
	var targets []string
	for _, m := range p.cfg.Members {
		if m.Name != p.cfg.Self {
			targets = append(targets, m.Target.String())
		}
	}
	pr.SetTargets(targets)
	return pr.Run(ctx)
}

// Tracker is the members' health tracker (for tests and probes).
func (p *Pool) Tracker() *health.Tracker { return p.tr }

func cutPort(addr string) (host, port string, ok bool) {
	i := len(addr) - 1
	for i >= 0 && addr[i] != ':' {
		i--
	}
	if i < 0 {
		return "", "", false
	}
	host, port = addr[:i], addr[i+1:]
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return host, port, true
}
