package hqtrunk

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/resolve"
	"github.com/outpost/outpost/siptarget"
)

// Config is where calls routed to HQ go: the HQ domain (RFC 3263) or
// static targets, an optional backup pool, and the health thresholds.
type Config struct {
	Domain string
	// Static targets, each with its transport (siptarget.Parse with
	// Transport as the default); when set, Domain is not resolved.
	Static []siptarget.Target
	// Transport of the SRV lookup of Domain: udp ("" = udp), tcp or tls
	// (tls.go: the server is verified against CAPEM and the HQ name).
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
	Backup *Pool
	// CallFallback (hq.call_fallback): a call whose every HQ target failed
	// by the retry rule goes out at once by the survivable route of its
	// number (the rule's alternative or pstn_prefix), without waiting for
	// the probes to change the mode. It is read per call, so changing it
	// keeps the trunk (and its health).
	CallFallback bool
	// TrustedNetworks (hq.trusted_networks) are networks whose every
	// address is trusted as HQ, on any port and transport (the gateway's
	// trust.go). They do not make the trunk: a change keeps the resolver
	// and health state.
	TrustedNetworks []netip.Prefix
}

// Pool is one pool of HQ servers: a domain (RFC 3263) or static
// targets, with the transport of the SRV lookup.
type Pool struct {
	Domain     string
	Static     []siptarget.Target
	Transport  siptarget.Transport
	SRVService string
}

func (p Pool) equal(q Pool) bool {
	return p.Domain == q.Domain && slices.Equal(p.Static, q.Static) && p.Transport == q.Transport && p.SRVService == q.SRVService
}

// describe names the pool in events and logs: "primary hq.example.com".
func (p Pool) describe(role string) string {
	if len(p.Static) == 0 {
		return role + " " + p.Domain
	}
	names := make([]string, len(p.Static))
	for i, t := range p.Static {
		names[i] = t.String()
	}
	return role + " " + strings.Join(names, ",")
}

// Trunk gives the B2BUA the HQ targets to try, in order: the primary
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
type Trunk struct {
	cfg       Config
	pools     []*hqPool           // primary, then backup
	transport siptarget.Transport // of Domain's SRV lookup (upstream's default)
	tls       hqTLS
	// dialer opens TLS connections to targets before a request (Connect);
	// set once, by UseDialer, before the trunk is shared.
	dialer *Dialer

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
	// names: the name each resolved target is known by (tls.go), by
	// address; replaced at each resolution.
	names map[netip.Addr]string
	// resolved: the targets of the last resolution, by name.
	resolved map[string]bool
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

// Next is the HQ trunk for cfg (nil for none): cur when it was built from
// an equal configuration (keeping its DNS cache and health), a new one
// otherwise.
func Next(cur *Trunk, cfg *Config) (*Trunk, error) {
	if cfg == nil {
		return nil, nil
	}
	if cur != nil && cur.same(*cfg) {
		return cur, nil
	}
	return New(*cfg)
}

// New builds a trunk; its probes run when a Prober runs it.
func New(cfg Config) (*Trunk, error) {
	h := &Trunk{cfg: cfg}
	var err error
	if h.tls, err = newHQTLS(cfg); err != nil {
		return nil, err
	}
	primary := Pool{Domain: cfg.Domain, Static: cfg.Static, Transport: cfg.Transport, SRVService: cfg.SRVService}
	pools := []Pool{primary}
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
			return nil, fmt.Errorf("hq %s: %w", role, err)
		}
		if i == 0 {
			h.transport = tr
		}
		h.pools = append(h.pools, &hqPool{name: pc.describe(role), domain: pc.Domain, res: res, lost: make(chan struct{}),
			tracker: health.New(health.Config{DownAfter: cfg.DownAfter, UpAfter: cfg.UpAfter, Interval: cfg.ProbeInterval})})
	}
	return h, nil
}

// Health is the state of every HQ target, primary pool first, for status
// and the mode logic (none for a nil trunk).
func (h *Trunk) Health() []health.TargetState {
	if h == nil {
		return nil
	}
	var out []health.TargetState
	for _, pool := range h.pools {
		out = append(out, pool.tracker.Snapshot()...)
	}
	return out
}

// same reports whether the trunk was built from an equal configuration, so
// a push that does not touch HQ keeps the resolver cache and target health.
// CallFallback is not part of the trunk (it is read per call).
func (h *Trunk) same(cfg Config) bool {
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
func (h *Trunk) Targets(ctx context.Context) ([]string, error) {
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

// errUnresolved: the pool's resolution keeps failing (see Trunk).
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
	set := make(map[string]bool, len(ts))
	for _, t := range ts {
		names = append(names, t.Dest().String())
		set[names[len(names)-1]] = true
	}
	pool.mu.Lock()
	pool.resolved = set
	pool.mu.Unlock()
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

// Backup reports whether target came from the backup pool's last
// resolution and not from the primary's.
func (h *Trunk) Backup(target string) bool {
	return len(h.pools) > 1 && !h.pools[0].has(target) && h.pools[1].has(target)
}

func (pool *hqPool) has(target string) bool {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.resolved[target]
}

// Report feeds a call attempt's outcome to the health of the pool the
// target belongs to.
func (h *Trunk) Report(target string, status int, err error) {
	tr := h.pools[0].tracker
	for _, pool := range h.pools[1:] {
		if !tr.Knows(target) && pool.tracker.Knows(target) {
			tr = pool.tracker
		}
	}
	tr.Observe(target, health.ClassifyForHealth(status, err))
}
