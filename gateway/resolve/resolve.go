package resolve

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/outpost/outpost/siptarget"
)

// Defaults applied to zero Config fields.
const (
	DefaultTimeout = 2 * time.Second
	DefaultMinTTL  = 5 * time.Second
	DefaultMaxTTL  = time.Hour
)

// DefaultResolvConf is where the system resolver's servers are read from
// when Config.Servers is empty.
const DefaultResolvConf = "/etc/resolv.conf"

// Errors reported (wrapped) by Resolve.
var (
	// ErrNoSuchHost: the DNS answered NXDOMAIN for a name that was needed.
	ErrNoSuchHost = errors.New("no such host")
	// ErrNoTargets: resolution worked but produced no usable address.
	ErrNoTargets = errors.New("no targets")
	// ErrNoService: the SRV RRset is a single record with target "." (RFC 2782:
	// the service is decidedly not available at this domain).
	ErrNoService = errors.New("service decidedly not available (SRV target \".\")")
)

// RcodeError is a DNS response whose rcode is neither NOERROR nor NXDOMAIN
// (SERVFAIL, REFUSED, ...). Such answers count as "DNS unreachable".
type RcodeError struct {
	Rcode int
}

func (e *RcodeError) Error() string {
	if s, ok := dns.RcodeToString[e.Rcode]; ok {
		return s
	}
	return "rcode " + strconv.Itoa(e.Rcode)
}

// Target is one address to try, in the order Resolve returns them.
type Target struct {
	Host      string              // SRV target, the domain, or the static host (no trailing dot)
	Addr      netip.AddrPort      // where to send
	Transport siptarget.Transport // udp, tcp or tls
	Priority  uint16              // SRV priority (static targets: their index in Config.Static)
	Weight    uint16              // SRV weight (0 for A/AAAA fallback and static targets)
}

// Dest is where to send as a SIP target: the transport and the resolved
// address ("udp:198.18.1.10:5060"), the form the gateway names targets by.
func (t Target) Dest() siptarget.Target {
	return siptarget.Target{Transport: t.Transport, Host: t.Addr.Addr().String(), Addr: t.Addr.Addr(), Port: t.Addr.Port()}
}

// Config configures a Resolver. The zero value of each field means its default.
type Config struct {
	Domain string // e.g. hq.example.com; empty = only Static
	// Static targets (siptarget.Parse: IP literal or name, each with its
	// own transport and port); when non-empty, SRV is not used.
	Static    []siptarget.Target
	Transport siptarget.Transport // udp (default), tcp, tls → SRV _sip._udp / _sip._tcp / _sips._tcp (then _sip._tls)
	// SRVService replaces the transport's SRV service label ("_service._proto",
	// e.g. "_sipinternaltls._tcp" for a Lync/Skype pool); "" = by Transport.
	SRVService string
	Servers    []string // DNS servers "ip:port" (bare ip = port 53); empty = the system resolver
	// ResolvConf is the system resolver's configuration file, read when
	// Servers is empty (at each query that reaches DNS, so a DHCP or PPPoE
	// renewal that rewrites it is followed); "" = /etc/resolv.conf.
	ResolvConf string
	Timeout    time.Duration // per query and server, 0 = 2 s
	MinTTL     time.Duration // clamp of cache lifetimes, 0 = 5 s
	MaxTTL     time.Duration // 0 = 1 h
	Now        func() time.Time
	Rand       *rand.Rand // math/rand/v2; nil = the global source. Access is serialised.
}

type staticEntry struct {
	siptarget.Target
	fqdn string // lower-case FQDN for names, "" for IP literals
}

// Resolver locates the HQ SIP servers. It is safe for concurrent use.
type Resolver struct {
	domain  string // display form, no trailing dot
	fqdn    string // lower-case FQDN
	srvName string // _sip._udp.<fqdn>
	// srvAlt is asked when srvName has no records (NXDOMAIN or NODATA),
	// before falling back to A/AAAA: _sip._tls.<fqdn> for tls (the older
	// RFC 2543 form some servers still publish); "" = none.
	srvAlt    string
	transport siptarget.Transport
	port      uint16 // default port of the transport
	static    []staticEntry
	servers   []string
	resolv    string // resolv.conf path, used when servers is empty
	timeout   time.Duration
	minTTL    time.Duration
	maxTTL    time.Duration
	now       func() time.Time

	rmu sync.Mutex
	rng *rand.Rand

	udp, tcp *dns.Client
	pref     atomic.Uint32 // index of the server that answered last

	mu       sync.Mutex
	cache    map[cacheKey]*entry
	inflight map[cacheKey]*call

	stale atomic.Bool
}

// New validates cfg and returns a Resolver. It sends no traffic.
func New(cfg Config) (*Resolver, error) {
	r := &Resolver{
		timeout:  cfg.Timeout,
		minTTL:   cfg.MinTTL,
		maxTTL:   cfg.MaxTTL,
		now:      cfg.Now,
		rng:      cfg.Rand,
		cache:    make(map[cacheKey]*entry),
		inflight: make(map[cacheKey]*call),
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	if r.minTTL <= 0 {
		r.minTTL = DefaultMinTTL
	}
	if r.maxTTL <= 0 {
		r.maxTTL = DefaultMaxTTL
	}
	if r.minTTL > r.maxTTL {
		return nil, fmt.Errorf("gateway/resolve: MinTTL %v exceeds MaxTTL %v", r.minTTL, r.maxTTL)
	}
	if r.now == nil {
		r.now = time.Now
	}

	var srvPrefix string
	switch r.transport = siptarget.Transport(strings.ToLower(string(cfg.Transport))); r.transport {
	case "", siptarget.UDP:
		r.transport, srvPrefix = siptarget.UDP, "_sip._udp."
	case siptarget.TCP:
		srvPrefix = "_sip._tcp."
	case siptarget.TLS:
		srvPrefix = "_sips._tcp."
	default:
		return nil, fmt.Errorf("gateway/resolve: unknown transport %q (want udp, tcp or tls)", cfg.Transport)
	}
	r.port = r.transport.DefaultPort()

	for _, s := range cfg.Servers {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				return nil, fmt.Errorf("gateway/resolve: DNS server %q: want ip:port: %w", s, err)
			}
			ap = netip.AddrPortFrom(a, 53)
		}
		r.servers = append(r.servers, ap.String())
	}

	for i, s := range cfg.Static {
		if !s.Transport.Valid() || s.Host == "" || s.Port == 0 {
			return nil, fmt.Errorf("gateway/resolve: Static[%d] %+v: not a parsed target (siptarget.Parse)", i, s)
		}
		e := staticEntry{Target: s}
		if !s.IsIP() {
			e.fqdn = dns.Fqdn(s.Host)
		}
		r.static = append(r.static, e)
	}
	if len(r.static) == 0 {
		if cfg.Domain == "" {
			return nil, errors.New("gateway/resolve: neither Domain nor Static targets configured")
		}
		d := strings.TrimSuffix(strings.ToLower(cfg.Domain), ".")
		if _, ok := dns.IsDomainName(d); !ok || d == "" || net.ParseIP(d) != nil {
			return nil, fmt.Errorf("gateway/resolve: invalid Domain %q", cfg.Domain)
		}
		r.domain = d
		r.fqdn = dns.Fqdn(d)
		r.srvName = srvPrefix + r.fqdn
		if r.transport == siptarget.TLS {
			r.srvAlt = "_sip._tls." + r.fqdn
		}
		if svc := strings.TrimSuffix(cfg.SRVService, "."); svc != "" {
			if _, ok := dns.IsDomainName(svc); !ok || !strings.HasPrefix(svc, "_") || strings.Count(svc, ".") != 1 {
				return nil, fmt.Errorf("gateway/resolve: invalid SRVService %q (want _service._proto)", cfg.SRVService)
			}
			r.srvName, r.srvAlt = svc+"."+r.fqdn, ""
		}
	}
	if len(r.servers) == 0 {
		r.resolv = cfg.ResolvConf
		if r.resolv == "" {
			r.resolv = DefaultResolvConf
		}
	}

	r.udp = &dns.Client{Net: "udp", Timeout: r.timeout}
	r.tcp = &dns.Client{Net: "tcp", Timeout: r.timeout}
	return r, nil
}

// Stale reports whether the most recent successful Resolve served any part of
// its answer from an expired cache entry because DNS was unreachable (network
// error, timeout, SERVFAIL or another server failure on every server).
func (r *Resolver) Stale() bool { return r.stale.Load() }

// Resolve returns the targets in the order to try them: grouped by SRV
// priority (lowest first), within a group in RFC 2782 weighted random order,
// each SRV target expanded to its A then AAAA addresses (additional-section
// records are used when present). Without SRV records: the A then AAAA
// addresses of the domain on the transport's default port (5060, 5061 for
// tls). With Config.Static, the static targets in their configured order.
//
// Answers are cached per query name and type honouring TTLs clamped to
// [MinTTL, MaxTTL]. When every DNS server is unreachable or fails, the last
// good answer is served and Stale reports true.
func (r *Resolver) Resolve(ctx context.Context) ([]Target, error) {
	var (
		out   []Target
		stale bool
		err   error
	)
	if len(r.static) > 0 {
		out, stale, err = r.resolveStatic(ctx)
	} else {
		out, stale, err = r.resolveDomain(ctx)
	}
	if err != nil {
		return nil, err
	}
	r.stale.Store(stale)
	return out, nil
}

func (r *Resolver) resolveStatic(ctx context.Context) ([]Target, bool, error) {
	out := make([]Target, 0, len(r.static))
	var (
		stale bool
		errs  []error
	)
	for i, s := range r.static {
		prio := uint16(min(i, 0xffff))
		if s.fqdn == "" {
			out = append(out, Target{Host: s.Host, Addr: s.AddrPort(), Transport: s.Transport, Priority: prio})
			continue
		}
		var st bool
		var err error
		out, st, err = r.appendHost(ctx, out, s.fqdn, s.Host, nil, s.Transport, s.Port, prio, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		stale = stale || st
	}
	if len(out) == 0 {
		if len(errs) == 1 {
			return nil, false, errs[0]
		}
		return nil, false, fmt.Errorf("gateway/resolve: static targets: %w", &multiError{errs: errs})
	}
	return out, stale, nil
}

func (r *Resolver) resolveDomain(ctx context.Context) ([]Target, bool, error) {
	srvName := r.srvName
	e, stale, err := r.lookup(ctx, srvName, dns.TypeSRV)
	if err != nil {
		return nil, false, fmt.Errorf("gateway/resolve: SRV %s: %w", strings.TrimSuffix(srvName, "."), err)
	}
	if len(e.srvs) == 0 && r.srvAlt != "" {
		srvName = r.srvAlt
		var st bool
		if e, st, err = r.lookup(ctx, srvName, dns.TypeSRV); err != nil {
			return nil, false, fmt.Errorf("gateway/resolve: SRV %s: %w", strings.TrimSuffix(srvName, "."), err)
		}
		stale = stale || st
	}
	if len(e.srvs) == 0 { // NXDOMAIN or NODATA: RFC 3263 §4.2 falls back to A/AAAA
		out, st, err := r.appendHost(ctx, nil, r.fqdn, r.domain, nil, r.transport, r.port, 0, 0)
		if err != nil {
			return nil, false, err
		}
		return out, stale || st, nil
	}
	if len(e.srvs) == 1 && e.srvs[0].target == "." {
		return nil, false, fmt.Errorf("gateway/resolve: SRV %s: %w", strings.TrimSuffix(srvName, "."), ErrNoService)
	}

	order := r.orderSRV(e.srvs)
	out := make([]Target, 0, len(order)*e.addrsPerTarget())
	var errs []error
	for _, s := range order {
		if s.target == "." {
			continue
		}
		var st bool
		var err error
		out, st, err = r.appendHost(ctx, out, s.target, s.host, e.extra, r.transport, s.port, s.priority, s.weight)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		stale = stale || st
	}
	if len(out) == 0 {
		return nil, false, fmt.Errorf("gateway/resolve: SRV %s: %w: %w", strings.TrimSuffix(srvName, "."), ErrNoTargets, &multiError{errs: errs})
	}
	return out, stale, nil
}

// appendHost appends the A then AAAA addresses of fqdn (taken from extra when
// the SRV answer carried them) as targets.
func (r *Resolver) appendHost(ctx context.Context, out []Target, fqdn, host string, extra map[string][]netip.Addr, tr siptarget.Transport, port, prio, weight uint16) ([]Target, bool, error) {
	if addrs, ok := extra[fqdn]; ok {
		for _, a := range addrs {
			out = append(out, Target{Host: host, Addr: netip.AddrPortFrom(a, port), Transport: tr, Priority: prio, Weight: weight})
		}
		return out, false, nil
	}
	n := len(out)
	var (
		stale bool
		errs  []error
	)
	for _, qt := range [2]uint16{dns.TypeA, dns.TypeAAAA} {
		e, st, err := r.lookup(ctx, fqdn, qt)
		if err != nil {
			errs = append(errs, fmt.Errorf("gateway/resolve: %s %s: %w", dns.TypeToString[qt], host, err))
			continue
		}
		if e.nx {
			// NXDOMAIN covers every type: no need to ask for AAAA.
			if len(errs) == 0 && len(out) == n {
				return out, false, fmt.Errorf("gateway/resolve: %s %s: %w", dns.TypeToString[qt], host, ErrNoSuchHost)
			}
			break
		}
		stale = stale || st
		for _, a := range e.addrs {
			out = append(out, Target{Host: host, Addr: netip.AddrPortFrom(a, port), Transport: tr, Priority: prio, Weight: weight})
		}
	}
	if len(out) > n {
		return out, stale, nil // a partial answer (say A but AAAA failed) is still usable
	}
	if len(errs) > 0 {
		if len(errs) == 1 {
			return out, false, errs[0]
		}
		return out, false, &multiError{errs: errs}
	}
	return out, false, fmt.Errorf("gateway/resolve: A/AAAA %s: %w", host, ErrNoTargets)
}

func (r *Resolver) intN(n int) int {
	if r.rng == nil {
		return rand.IntN(n)
	}
	r.rmu.Lock()
	v := r.rng.IntN(n)
	r.rmu.Unlock()
	return v
}

// multiError joins errors on one line ("; ") and unwraps to all of them.
type multiError struct{ errs []error }

func (m *multiError) Error() string {
	var b strings.Builder
	for i, e := range m.errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (m *multiError) Unwrap() []error { return m.errs }
