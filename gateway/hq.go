package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/resolve"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/siptarget"
)

// HQConfig is where calls routed to HQ go: the HQ domain (RFC 3263) or
// static targets, an optional backup pool, and the health thresholds.
type HQConfig struct {
	Domain string
	// Static targets, each with its transport (siptarget.Parse with
	// Transport as the default); when set, Domain is not resolved.
	Static []siptarget.Target
	// Transport of the SRV lookup of Domain: udp ("" = udp), tcp or tls
	// (hqtls.go: the server is verified against CAPEM and the HQ name).
	Transport siptarget.Transport
	// SRVService replaces the SRV label of Transport (resolve.Config).
	SRVService string
	// CAPEM verifies HQ's TLS servers ("" = the system roots);
	// ClientCertPEM/ClientKeyPEM are presented for mutual TLS (optional).
	CAPEM, ClientCertPEM, ClientKeyPEM string
	// DNSServers ("ip:port") resolve both pools; empty = the system
	// resolver (/etc/resolv.conf, see gateway/resolve).
	DNSServers []string
	DownAfter  int
	UpAfter    int
	// ProbeInterval is the OPTIONS period per target (hq.options_interval_ms);
	// 0 = health.DefaultInterval.
	ProbeInterval time.Duration
	// Backup is a second HQ pool (hq.backup), probed on its own and used
	// by calls only when every target of the primary pool has failed;
	// nil = none.
	Backup *HQPool
	// CallFallback (hq.call_fallback): a call whose every HQ target failed
	// by the retry rule goes out at once by the survivable route of its
	// number (the rule's alternative or pstn_prefix), without waiting for
	// the probes to change the mode. It is read per call, so changing it
	// keeps the trunk (and its health).
	CallFallback bool
	// TrustedNetworks (hq.trusted_networks) are networks whose every
	// address is trusted as HQ, on any port and transport (trust.go). They
	// do not make the trunk: a change keeps the resolver and health state.
	TrustedNetworks []netip.Prefix
}

// HQPool is one pool of HQ servers: a domain (RFC 3263) or static
// targets, with the transport of the SRV lookup.
type HQPool struct {
	Domain     string
	Static     []siptarget.Target
	Transport  siptarget.Transport
	SRVService string
}

func (p HQPool) equal(q HQPool) bool {
	return p.Domain == q.Domain && slices.Equal(p.Static, q.Static) && p.Transport == q.Transport && p.SRVService == q.SRVService
}

// describe names the pool in events and logs: "primary hq.example.com".
func (p HQPool) describe(role string) string {
	if len(p.Static) == 0 {
		return role + " " + p.Domain
	}
	names := make([]string, len(p.Static))
	for i, t := range p.Static {
		names[i] = t.String()
	}
	return role + " " + strings.Join(names, ",")
}

// hqTrunk gives the B2BUA the HQ targets to try, in order: the primary
// pool's, resolved (SRV priority, then weight), healthy ones first
// (health.Tracker.Pick: if all are blocked, one blocked target at random),
// then the backup pool's the same way. Two kinds of evidence feed each
// target's health: each call attempt's outcome (passive) and an OPTIONS
// probe per resolved target every ProbeInterval (active). The probed set
// follows DNS: each pool is re-resolved every probe round (the resolver
// answers from its TTL cache, and keeps the last good answer while DNS is
// unreachable), so a target that leaves the SRV set stops being probed.
//
// A pool that has never resolved (a box booted while the WAN is silent,
// or with no carrier) has nothing to probe: each failed resolution counts
// as a failed probe of the pool, and DownAfter of them in a row make the
// pool unresolved — an outage for the mode logic, not "nothing known".
type hqTrunk struct {
	cfg       HQConfig
	pools     []*hqPool           // primary, then backup
	transport siptarget.Transport // of Domain's SRV lookup (upstream's default)
	tls       hqTLS
	// connect opens a TLS connection to a target before a request
	// (Server.connectHQ); set once when the Server takes the trunk.
	connect func(ctx context.Context, target string) error

	stop func() // ends the probers started by start; nil = not running
}

// hqPool is one pool's resolver and health.
type hqPool struct {
	name    string // "primary hq.example.com", "backup 198.18.1.20:5060"
	domain  string // the pool's domain ("" = static targets only)
	res     *resolve.Resolver
	tracker *health.Tracker
	// unresolved: DownAfter resolutions in a row failed and the pool has
	// no target; calls skip it (without waiting for DNS) until the prober
	// resolves it again.
	unresolved atomic.Bool
	// lost is closed when the pool becomes unresolved, so that a call
	// waiting for its DNS gives up at once (and falls back) instead of
	// waiting for its own DNS timeout; a new one is made when it resolves.
	mu   sync.Mutex
	lost chan struct{}
	// names: the name each resolved target is known by (hqtls.go), by
	// address; replaced at each resolution.
	names map[netip.Addr]string
}

// setUnresolved marks the pool (un)resolved and reports whether that is a
// change.
func (pool *hqPool) setUnresolved(v bool) bool {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.unresolved.Swap(v) == v {
		return false
	}
	if v {
		close(pool.lost)
	} else {
		pool.lost = make(chan struct{})
	}
	return true
}

func (pool *hqPool) lostCh() <-chan struct{} {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.lost
}

// nextHQ is the HQ trunk for cfg: cur when its section is unchanged
// (keeping DNS cache and health), a new one otherwise.
func nextHQ(cur *hqTrunk, cfg Config) (*hqTrunk, error) {
	if cfg.HQTrunk == nil {
		return nil, nil
	}
	if cur != nil && cur.same(*cfg.HQTrunk) {
		return cur, nil
	}
	return newHQTrunk(*cfg.HQTrunk)
}

func newHQTrunk(cfg HQConfig) (*hqTrunk, error) {
	h := &hqTrunk{cfg: cfg}
	var err error
	if h.tls, err = newHQTLS(cfg); err != nil {
		return nil, err
	}
	primary := HQPool{Domain: cfg.Domain, Static: cfg.Static, Transport: cfg.Transport, SRVService: cfg.SRVService}
	pools := []HQPool{primary}
	if cfg.Backup != nil {
		pools = append(pools, *cfg.Backup)
	}
	for i, pc := range pools {
		role := "primary"
		if i > 0 {
			role = "backup"
		}
		tr := pc.Transport
		if tr == "" {
			tr = siptarget.UDP
		}
		res, err := resolve.New(resolve.Config{Domain: pc.Domain, Static: pc.Static, Transport: tr, SRVService: pc.SRVService, Servers: cfg.DNSServers})
		if err != nil {
			return nil, fmt.Errorf("gateway: hq %s: %w", role, err)
		}
		if i == 0 {
			h.transport = tr
		}
		h.pools = append(h.pools, &hqPool{name: pc.describe(role), domain: pc.Domain, res: res, lost: make(chan struct{}),
			tracker: health.New(health.Config{DownAfter: cfg.DownAfter, UpAfter: cfg.UpAfter, Interval: cfg.ProbeInterval})})
	}
	return h, nil
}

// start runs one OPTIONS prober per pool under ctx until stop. The caller
// (the Server) owns it: it stops a trunk it replaces and the last one on
// exit. Verdicts (a target new, up or down by its probes, or gone from the
// probed set; a pool unresolved or resolved again) go to notify, in order,
// from one goroutine.
func (h *hqTrunk) start(ctx context.Context, ping health.Pinger, notify func(HQTargetEvent), log *slog.Logger) {
	ctx, cancel := context.WithCancel(ctx)
	events := make(chan HQTargetEvent, 64)
	send := func(ev HQTargetEvent) bool {
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
func (pool *hqPool) start(ctx context.Context, wg *sync.WaitGroup, ping health.Pinger, send func(HQTargetEvent) bool, log *slog.Logger) {
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
					if !send(HQTargetEvent{Target: c.Target, Pool: pool.name, Up: c.Up, Reason: string(c.Reason), At: c.At}) {
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
// target counts as a failed probe of the pool (see hqTrunk).
func (pool *hqPool) resolveLoop(ctx context.Context, p *health.Prober, send func(HQTargetEvent) bool, log *slog.Logger) {
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
				if !send(HQTargetEvent{Pool: pool.name, Resolved: true, Reason: "resolved", At: now}) {
					return
				}
			}
			for _, n := range names {
				if !slices.Contains(probed, n) && !send(HQTargetEvent{Target: n, Pool: pool.name, Up: true, Reason: string(health.ReasonNew), At: now}) {
					return
				}
			}
			p.SetTargets(names)
			for _, n := range probed {
				if !slices.Contains(names, n) && !send(HQTargetEvent{Target: n, Pool: pool.name, Gone: true, Reason: "no longer resolved", At: now}) {
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
				if !send(HQTargetEvent{Pool: pool.name, Unresolved: true, Reason: "resolution failed: " + err.Error(), At: time.Now()}) {
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

// HQTargetEvent is a change of one HQ target's probe verdict, or of a
// pool's resolution (Target empty, Unresolved or Resolved set).
type HQTargetEvent struct {
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
func (h *hqTrunk) close() {
	if h != nil && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// forget lists the events that retire every target and pool of the trunk
// (its hq section changed).
func (h *hqTrunk) forget(why string) []HQTargetEvent {
	now := time.Now()
	var out []HQTargetEvent
	for _, pool := range h.pools {
		for _, t := range pool.tracker.Snapshot() {
			out = append(out, HQTargetEvent{Target: t.Target, Pool: pool.name, Gone: true, Reason: why, At: now})
		}
		if pool.unresolved.Load() {
			out = append(out, HQTargetEvent{Pool: pool.name, Resolved: true, Reason: why, At: now})
		}
	}
	return out
}

// Health is the state of every HQ target, primary pool first, for status
// and the mode logic.
func (h *hqTrunk) Health() []health.TargetState {
	var out []health.TargetState
	for _, pool := range h.pools {
		out = append(out, pool.tracker.Snapshot()...)
	}
	return out
}

// same reports whether the trunk was built from an equal configuration, so
// a push that does not touch HQ keeps the resolver cache and target health.
// CallFallback is not part of the trunk (it is read per call).
func (h *hqTrunk) same(cfg HQConfig) bool {
	backupSame := (h.cfg.Backup == nil) == (cfg.Backup == nil) && (cfg.Backup == nil || h.cfg.Backup.equal(*cfg.Backup))
	return h.cfg.Domain == cfg.Domain && slices.Equal(h.cfg.Static, cfg.Static) && h.cfg.Transport == cfg.Transport &&
		h.cfg.SRVService == cfg.SRVService && h.cfg.CAPEM == cfg.CAPEM && h.cfg.ClientCertPEM == cfg.ClientCertPEM && h.cfg.ClientKeyPEM == cfg.ClientKeyPEM &&
		slices.Equal(h.cfg.DNSServers, cfg.DNSServers) && h.cfg.DownAfter == cfg.DownAfter && h.cfg.UpAfter == cfg.UpAfter &&
		h.cfg.ProbeInterval == cfg.ProbeInterval && backupSame
}

// backupQuick bounds the backup pool's resolution for a call while the
// primary has an eligible target: the backup is only the last resort then,
// and its (prober-warmed) cache answers at once; a silent DNS must not
// delay a call that the primary will take.
const backupQuick = 200 * time.Millisecond

// Targets lists the HQ targets of one call in the order to try them. The
// primary pool's come first; the backup's follow, so a call reaches the
// backup only after every primary target failed by the retry rule. When no
// primary target is eligible (all down by probes or blocked by failed
// calls: they have failed) and the backup has one, the backup comes first.
// A pool whose resolution keeps failing is skipped without waiting for DNS.
func (h *hqTrunk) Targets(ctx context.Context) ([]string, error) {
	primary := h.pools[0]
	var backup *hqPool
	if len(h.pools) > 1 {
		backup = h.pools[1]
	}
	var errs []error
	var first []string
	eligible := false
	if primary.unresolved.Load() {
		errs = append(errs, fmt.Errorf("%s: %w", primary.name, errUnresolved))
	} else {
		names, err := primary.targets(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", primary.name, err))
		}
		first = primary.tracker.Pick(names)
		eligible = slices.ContainsFunc(names, primary.tracker.Eligible)
	}
	if backup == nil {
		if len(first) == 0 && len(errs) > 0 {
			return nil, errs[0]
		}
		return first, nil
	}
	var second []string
	bctx := ctx
	if eligible {
		var cancel context.CancelFunc
		bctx, cancel = context.WithTimeout(ctx, backupQuick)
		defer cancel()
	}
	if backup.unresolved.Load() {
		errs = append(errs, fmt.Errorf("%s: %w", backup.name, errUnresolved))
	} else {
		names, err := backup.targets(bctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", backup.name, err))
		}
		second = backup.tracker.Pick(names)
		if !eligible && slices.ContainsFunc(names, backup.tracker.Eligible) {
			first, second = second, first
		}
	}
	out := slices.Clone(first)
	for _, n := range second {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// errUnresolved: the pool's resolution keeps failing (see hqTrunk).
var errUnresolved = errors.New("unresolved: no target known")

// targets resolves the pool: its targets by name, in SRV order. The wait
// ends early when the prober declares the pool unresolved meanwhile.
func (pool *hqPool) targets(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(channelContext(pool.lostCh()), func() { cancel(errUnresolved) })
	defer stop()
	ts, err := pool.res.Resolve(ctx)
	if err != nil {
		if c := context.Cause(ctx); errors.Is(c, errUnresolved) {
			return nil, c
		}
		return nil, err
	}
	pool.learn(ts)
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.Dest().String())
	}
	return names, nil
}

// channelContext is a context that ends when ch is closed (and never
// otherwise), for context.AfterFunc.
type channelContext <-chan struct{}

func (c channelContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c channelContext) Done() <-chan struct{}       { return c }
func (c channelContext) Value(any) any               { return nil }
func (c channelContext) Err() error {
	select {
	case <-c:
		return context.Canceled
	default:
		return nil
	}
}

// Report feeds a call attempt's outcome to the health of the pool the
// target belongs to.
func (h *hqTrunk) Report(target string, status int, err error) {
	tr := h.pools[0].tracker
	for _, pool := range h.pools[1:] {
		if !tr.Knows(target) && pool.tracker.Knows(target) {
			tr = pool.tracker
		}
	}
	tr.Observe(target, health.ClassifyForHealth(status, err))
}

// HQHealth is the health of every HQ target (nil without HQ): for
// outpostctl status, metrics and the mode logic.
func (s *Server) HQHealth() []health.TargetState {
	if hq := s.hqNow.Load(); hq != nil {
		return hq.Health()
	}
	return nil
}

// HQFallback is the per-call fallback the B2BUA asks for (b2bua.HQFallback)
// when every HQ target of a call failed by the retry rule: the route the
// number takes in survivable mode (the rule's survivable alternative or
// the pstn_prefix fallback), if hq.call_fallback is on and that route is
// not HQ again. The mode is not changed: the probes decide that.
func (r router) HQFallback(number string) (dialplan.Decision, bool) {
	cfg := r.s.cfg.Load()
	if cfg.HQTrunk == nil || !cfg.HQTrunk.CallFallback {
		return dialplan.Decision{}, false
	}
	d, ok := r.s.plan.Load().Outbound(number, mode.Survivable)
	if !ok || d.Route == "" || d.Route == dialplan.RouteHQ {
		return dialplan.Decision{}, false
	}
	return d, true
}
