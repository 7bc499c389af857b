package hqtrunk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/resolve"
	"github.com/outpost/outpost/siptarget"
)

// Prober runs the OPTIONS probes of the running HQ trunk on behalf of its
// owner (the gateway's Server): it starts them when the Server runs, moves
// them to a new trunk on a push and stops them on exit. Its methods are
// called with the owner's lock held. Probes leave from the listener
// facing each target (from), so HQ sees the box's address on the
// interface that faces it in Via and answers there (sipgo would otherwise
// open an ephemeral socket with Via 0.0.0.0).
type Prober struct {
	ctx    context.Context // the Server's Run context; nil = not running
	cli    *sipgo.Client
	from   func(hostport string) *sip.Addr
	notify atomic.Pointer[func(Event)]
}

// NewProber makes the prober of a Server whose requests go through ua;
// from picks the UDP listener a probe to hostport leaves from (nil = let
// sipgo choose).
func NewProber(ua *sipgo.UserAgent, from func(hostport string) *sip.Addr) *Prober {
	cli, _ := sipgo.NewClient(ua) // NewClient fails only on bad options
	return &Prober{cli: cli, from: from}
}

// OnEvent sets the function told every HQ target verdict (a new target,
// probes took it down or brought it up, or it left the target set) and
// every pool that could not be resolved or resolved again, for the mode
// logic. It is called from a prober's goroutine and must not block for
// long.
func (p *Prober) OnEvent(f func(Event)) { p.notify.Store(&f) }

func (p *Prober) tell(ev Event) {
	if f := p.notify.Load(); f != nil {
		(*f)(ev)
	}
}

// Context is the context probes run under: the Server's Run context, nil
// while it is not running. Other probers (PSTN gateways, pool members)
// start under it.
func (p *Prober) Context() context.Context { return p.ctx }

// Pinger is one OPTIONS per probe, from the facing listener; to t's
// targets when t is set (the Request-URI names HQ's domain, a TLS
// connection is opened first), to any other target (a PSTN gateway, a
// pool member) when nil.
func (p *Prober) Pinger(t *Trunk) health.Pinger {
	return optionsPinger{cli: p.cli, from: p.from, trunk: t}
}

// Run starts probing t (nil = no HQ) under ctx.
func (p *Prober) Run(ctx context.Context, t *Trunk, log *slog.Logger) {
	p.ctx = ctx
	if t != nil {
		t.start(ctx, p.Pinger(t), p.tell, log.With("part", "hq-probe"))
	}
}

// Stop ends t's probes.
func (p *Prober) Stop(t *Trunk) {
	t.close()
	p.ctx = nil
}

// Swap moves probing from the old trunk to next (nothing to do when the
// hq section did not change), retiring the old trunk's targets and pools.
func (p *Prober) Swap(old, next *Trunk, log *slog.Logger) {
	if old == next {
		return
	}
	old.close()
	if old != nil {
		for _, ev := range old.forget("hq section changed") {
			p.tell(ev)
		}
	}
	if p.ctx != nil && next != nil {
		next.start(p.ctx, p.Pinger(next), p.tell, log.With("part", "hq-probe"))
	}
}

// optionsPinger is one out-of-dialog OPTIONS per probe. Any final answer
// below 500 means the target is alive (a 404 or 405 is still a SIP stack
// answering); a 5xx or no answer within the probe's timeout is a failure.
type optionsPinger struct {
	cli   *sipgo.Client
	from  func(hostport string) *sip.Addr
	trunk *Trunk // nil = not an HQ target
}

func (p optionsPinger) Ping(ctx context.Context, target string) (time.Duration, error) {
	g, err := siptarget.Parse(target, siptarget.UDP)
	if err != nil {
		return 0, err
	}
	ruri := sip.Uri{Scheme: "sip", Host: g.Host, Port: int(g.Port)}
	if h := p.trunk.RequestHost(target); h != "" {
		ruri = sip.Uri{Scheme: "sip", Host: h}
	}
	req := sip.NewRequest(sip.OPTIONS, ruri)
	req.SetTransport(g.Transport.SIPName())
	req.SetDestination(g.HostPort())
	fromHost := "outpost.invalid"
	if p.from != nil && g.Transport == siptarget.UDP {
		if a := p.from(g.HostPort()); a != nil {
			req.Laddr = sip.Addr{IP: a.IP, Port: a.Port}
			fromHost = a.IP.String()
		}
	}
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "outpost", Host: fromHost}}
	from.Params.Add("tag", sip.GenerateTagN(12))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", Host: ruri.Host}})
	start := time.Now()
	if err := p.trunk.Connect(ctx, target); err != nil {
		return 0, fmt.Errorf("options %s: %w: %w", target, health.ErrNoResponse, err)
	}
	res, err := p.cli.Do(ctx, req)
	if err == nil && res == nil {
		// sipgo ends a transaction whose layer is closing (the Server
		// stopping under a probe in flight) with neither.
		err = errors.New("transaction ended without a response")
	}
	if err != nil {
		return 0, fmt.Errorf("options %s: %w: %w", target, health.ErrNoResponse, err)
	}
	if res.StatusCode >= 500 {
		return 0, fmt.Errorf("options %s: %d %s", target, res.StatusCode, res.Reason)
	}
	return time.Since(start), nil
}

// start runs one OPTIONS prober per pool under ctx until stop. The caller
// (the Server) owns it: it stops a trunk it replaces and the last one on
// exit. Verdicts (a target new, up or down by its probes, or gone from the
// probed set; a pool unresolved or resolved again) go to notify, in order,
// from one goroutine.
func (h *Trunk) start(ctx context.Context, ping health.Pinger, notify func(Event), log *slog.Logger) {
	ctx, cancel := context.WithCancel(ctx)
	events := make(chan Event, 64)
	send := func(ev Event) bool {
		select {
		case events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var wg sync.WaitGroup
	for _, pool := range h.pools {
		pool.start(ctx, &wg, ping, send, log.With("pool", pool.name))
	}
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				notify(ev)
			}
		}
	})
	h.stop = func() { cancel(); wg.Wait() }
}

// start runs the pool's prober, its resolution loop and the forwarding of
// its probe verdicts.
func (pool *hqPool) start(ctx context.Context, wg *sync.WaitGroup, ping health.Pinger, send func(Event) bool, log *slog.Logger) {
	p := health.NewProber(pool.tracker, ping)
	changes, unsubscribe := pool.tracker.Subscribe()
	wg.Go(func() {
		if err := p.Run(ctx); err != nil {
			log.Error("hq prober stopped", "err", err)
		}
	})
	wg.Go(func() { pool.resolveLoop(ctx, p, send, log) })
	wg.Go(func() {
		defer unsubscribe()
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-changes:
				// Only probe verdicts: a block by one failed call expires
				// silently and must not flip the box's mode (see package mode).
				if c.Reason == health.ReasonProbesFailed || c.Reason == health.ReasonProbesOK {
					if !send(Event{Target: c.Target, Pool: pool.name, Up: c.Up, Reason: string(c.Reason), At: c.At}) {
						return
					}
				}
			}
		}
	})
}

// resolveLoop resolves the pool every probe interval and hands the prober
// the result. New targets are announced up (they start up) before they
// are probed, so the mode logic knows the pool has candidates; targets
// that left are announced gone. A failed resolution while the pool has no
// target counts as a failed probe of the pool (see Trunk).
func (pool *hqPool) resolveLoop(ctx context.Context, p *health.Prober, send func(Event) bool, log *slog.Logger) {
	cfg := pool.tracker.Config()
	every := cfg.Interval
	t := time.NewTicker(every)
	defer t.Stop()
	var probed []string
	fails := 0
	for {
		rctx, rcancel := context.WithTimeout(ctx, every)
		ts, err := pool.res.Resolve(rctx)
		rcancel()
		if err == nil && len(ts) == 0 {
			err = resolve.ErrNoTargets
		}
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			pool.learn(ts)
			names := make([]string, 0, len(ts))
			for _, t := range ts {
				names = append(names, t.Dest().String())
			}
			now := time.Now()
			fails = 0
			if pool.setUnresolved(false) {
				log.Info("hq pool resolved again", "targets", names)
				if !send(Event{Pool: pool.name, Resolved: true, Reason: "resolved", At: now}) {
					return
				}
			}
			for _, n := range names {
				if !slices.Contains(probed, n) && !send(Event{Target: n, Pool: pool.name, Up: true, Reason: string(health.ReasonNew), At: now}) {
					return
				}
			}
			p.SetTargets(names)
			for _, n := range probed {
				if !slices.Contains(names, n) && !send(Event{Target: n, Pool: pool.name, Gone: true, Reason: "no longer resolved", At: now}) {
					return
				}
			}
			probed = names
		case len(probed) == 0:
			// Nothing to probe: the failed resolution is the pool's failed probe.
			fails++
			log.Debug("hq: resolve for probing", "err", err, "failures", fails)
			if fails >= cfg.DownAfter && pool.setUnresolved(true) {
				log.Warn("hq pool unresolved: no target known", "err", err, "failures", fails)
				if !send(Event{Pool: pool.name, Unresolved: true, Reason: "resolution failed: " + err.Error(), At: time.Now()}) {
					return
				}
			}
		default:
			log.Debug("hq: resolve for probing", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Event is a change of one HQ target's probe verdict, or of a
// pool's resolution (Target empty, Unresolved or Resolved set).
type Event struct {
	Target string // "udp:198.18.1.10:5060" (siptarget.Target.String); "" for a pool event
	Pool   string // "primary hq.example.com", "backup …"
	Up     bool
	Gone   bool // no longer an HQ target (DNS or config changed)
	// Unresolved: the pool has no target and its resolution failed
	// down_after times in a row. Resolved: it has targets again, or the
	// pool is no longer configured.
	Unresolved bool
	Resolved   bool
	Reason     string
	At         time.Time
}

// close stops the probers, if running.
func (h *Trunk) close() {
	if h != nil && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// forget lists the events that retire every target and pool of the trunk
// (its hq section changed).
func (h *Trunk) forget(why string) []Event {
	now := time.Now()
	var out []Event
	for _, pool := range h.pools {
		for _, t := range pool.tracker.Snapshot() {
			out = append(out, Event{Target: t.Target, Pool: pool.name, Gone: true, Reason: why, At: now})
		}
		if pool.unresolved.Load() {
			out = append(out, Event{Pool: pool.name, Resolved: true, Reason: why, At: now})
		}
	}
	return out
}
