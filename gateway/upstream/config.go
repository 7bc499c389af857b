package upstream

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/siptarget"
)

// Trunk is the HQ registrar pool: the targets to try for one REGISTER, in
// order (siptarget forms: "udp:198.18.1.10:5060", "tls:hq.example" or
// plain "host:port"), and the outcome of each attempt (status 0 = no final
// response) so that passive health learns from registrations too. It has
// the shape of the B2BUA's Trunk, so the gateway's HQ trunk (RFC 3263
// resolution ordered by health.Tracker.Pick) serves both.
type Trunk interface {
	Targets(ctx context.Context) ([]string, error)
	Report(target string, status int, err error)
}

// Connector is a Trunk that prepares the transport to a target before a
// REGISTER is sent there (the gateway opens its TLS connections to HQ
// itself); an error fails the attempt like a transport error.
type Connector interface {
	Connect(ctx context.Context, target string) error
}

// TLSRedirector is a Trunk that opens the TLS connection to a registrar a
// 3xx names by host ("pool2.hq.example:5061"): resolved with HQ's DNS and
// verified for that host with HQ's trust; it returns the address reached
// ("ip:port"), where the REGISTER goes. Without one, sipgo resolves and
// dials such a host itself.
type TLSRedirector interface {
	ConnectRedirect(ctx context.Context, hostport string) (string, error)
}

// Pool is a Trunk that also gives the resolved registrars with their SRV
// priority and health, so that each user keeps one registrar of its own
// (sticky, by rendezvous hashing: see the package doc). A Trunk that is
// not a Pool is used in the order it gives, for every user alike.
type Pool interface {
	Trunk
	// Candidates returns every resolved target (with the names Report
	// takes), whatever its health.
	Candidates(ctx context.Context) ([]Candidate, error)
}

// Candidate is one registrar of a Pool.
type Candidate struct {
	Target   string // siptarget form, as Targets and Report name it
	Priority int    // SRV priority: lower is preferred (RFC 2782)
	// Eligible is the target's health now: up by its probes and not
	// blocked after a failure (health.Tracker.Eligible).
	Eligible bool
}

// Static is a Trunk over a fixed list of targets that ignores reports.
type Static []string

// Targets returns a copy of s.
func (s Static) Targets(context.Context) ([]string, error) { return slices.Clone(s), nil }

// Report does nothing.
func (Static) Report(string, int, error) {}

// Defaults for the zero fields of Config.
const (
	DefaultExpires       = time.Hour
	DefaultReplayRate    = 50 // REGISTER jobs per second
	DefaultWorkers       = 8
	DefaultTimeout       = 5 * time.Second
	DefaultRetryInterval = 30 * time.Second
	DefaultRecheck       = time.Second
)

// Config is the upstream registration's part of the document. Zero fields
// mean defaults.
type Config struct {
	// Trunk gives the HQ targets (required).
	Trunk Trunk
	// Transport is used for targets given without a "udp:"/"tcp:"/"tls:"
	// prefix: udp ("" = udp), tcp or tls.
	Transport siptarget.Transport
	// ContactHost is the "host:port" at which HQ reaches the box; every
	// upstream binding is Contact: <sip:EXTENSION@ContactHost> (required;
	// IPv6 in brackets).
	ContactHost string
	// LocalAddr is the "ip:port" of the box's UDP listener that requests
	// leave from (sip.Request.Laddr). Empty lets sipgo choose a socket,
	// which is only right for a box with one listener.
	LocalAddr string
	// Domain is the site's SIP domain: the address of record registered
	// for a user is sip:EXTENSION@Domain, and the Request-URI is
	// sip:Domain (RFC 3261 §10.2) (required).
	Domain string
	// Registrar, when set, is the Request-URI's host instead of Domain:
	// HQ's own domain (hq.domain), which a domain-routed HQ (a Lync pool)
	// requires; the targets are only the next hop. To and From stay the
	// address of record.
	Registrar string
	// Username and Password are the box's trunk credentials at HQ
	// (hq.auth_username, hq.auth_password), used to answer 401/407.
	Username, Password string
	// Expires is the registration lifetime asked for (default 1 h). HQ
	// may grant less (or more after 423); refreshes follow what it grants.
	Expires time.Duration
	// ReplayRate bounds REGISTER jobs per second, over all users (default
	// 50). It paces everything: the replay on Resume, the first
	// registration of bindings restored at start, refreshes. A job is one
	// registration, its digest round trip and failover included.
	ReplayRate float64
	// Workers bounds concurrent REGISTER transactions (default 8). It is
	// read once, by New.
	Workers int
	// Timeout bounds one attempt at one target, digest round trip
	// included (default 5 s): a silent target costs this, not Timer B
	// (32 s), before the next target is tried.
	Timeout time.Duration
	// RetryInterval is the delay before retrying a user whose
	// registration failed (default 30 s); it doubles with each further
	// failure up to 16× and is at least a 503's Retry-After.
	RetryInterval time.Duration
	// Recheck is how often, with a Pool trunk, the users registered
	// elsewhere than at their first healthy registrar are found and
	// registered there again (default 1 s): a user leaves a registrar
	// that went down, and comes back to its recovered primary (the
	// binding left on the backup is then withdrawn), within one Recheck
	// of the health change instead of at the next refresh. The gateway
	// sets it to the HQ probe interval.
	Recheck time.Duration
}

// settings is a validated Config with defaults applied.
type settings struct {
	trunk         Trunk
	transport     siptarget.Transport // of targets without a prefix
	contactHost   string
	contactPort   int
	laddr         *sip.Addr // nil: sipgo chooses
	localAddr     string
	domain        string
	registrar     string // Request-URI host; "" = domain
	username      string
	password      string
	expires       int // seconds
	interval      time.Duration
	workers       int
	timeout       time.Duration
	retryInterval time.Duration
	recheck       time.Duration
}

// Check reports what New or Reconfigure would refuse in c, so that a
// caller can prepare a change it commits later without failing.
func (c Config) Check() error {
	_, err := c.settings()
	return err
}

func (c Config) settings() (*settings, error) {
	s := &settings{
		trunk:         c.Trunk,
		domain:        c.Domain,
		registrar:     c.Registrar,
		username:      c.Username,
		password:      c.Password,
		expires:       int(orDefault(c.Expires, DefaultExpires) / time.Second),
		workers:       c.Workers,
		timeout:       orDefault(c.Timeout, DefaultTimeout),
		retryInterval: orDefault(c.RetryInterval, DefaultRetryInterval),
		recheck:       orDefault(c.Recheck, DefaultRecheck),
	}
	if s.trunk == nil {
		return nil, fmt.Errorf("gateway/upstream: no trunk")
	}
	if s.domain == "" || strings.ContainsAny(s.domain, "@:;<> ") {
		return nil, fmt.Errorf("gateway/upstream: domain %q: want a host name", c.Domain)
	}
	if strings.ContainsAny(s.registrar, "@:;<> ") {
		return nil, fmt.Errorf("gateway/upstream: registrar %q: want a host name", c.Registrar)
	}
	s.transport = siptarget.UDP
	if c.Transport != "" {
		tr, err := siptarget.ParseTransport(string(c.Transport))
		if err != nil {
			return nil, fmt.Errorf("gateway/upstream: %w", err)
		}
		s.transport = tr
	}
	host, port, err := sip.ParseAddr(c.ContactHost)
	if err != nil || host == "" || port < 1 || port > 65535 {
		return nil, fmt.Errorf("gateway/upstream: contact host %q: want host:port", c.ContactHost)
	}
	s.contactHost, s.contactPort = host, port
	if c.LocalAddr != "" {
		ap, err := netip.ParseAddrPort(c.LocalAddr)
		if err != nil || ap.Port() == 0 {
			return nil, fmt.Errorf("gateway/upstream: local addr %q: want ip:port", c.LocalAddr)
		}
		s.laddr, s.localAddr = &sip.Addr{IP: ap.Addr().AsSlice(), Port: int(ap.Port())}, c.LocalAddr
	}
	if s.expires < 1 {
		s.expires = 1
	}
	rate := c.ReplayRate
	if rate <= 0 {
		rate = DefaultReplayRate
	}
	s.interval = time.Duration(float64(time.Second) / rate)
	if s.workers <= 0 {
		s.workers = DefaultWorkers
	}
	return s, nil
}

// identity reports whether two settings register the same bindings the
// same way; if not, every user is registered again.
func (s *settings) sameIdentity(o *settings) bool {
	return s.transport == o.transport && s.contactHost == o.contactHost && s.contactPort == o.contactPort &&
		s.domain == o.domain && s.registrar == o.registrar && s.username == o.username && s.password == o.password &&
		s.expires == o.expires && s.localAddr == o.localAddr
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// target is one parsed Trunk target.
type target struct {
	name      string // as the Trunk gave it, for Report
	key       string // canonical (siptarget.Target.String): loop detection
	transport string // "UDP", "TCP", "TLS" (siptarget.Transport.SIPName)
	dest      string // "host:port", IPv6 in brackets
}
