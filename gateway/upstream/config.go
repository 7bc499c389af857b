package upstream

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
)

// Trunk is the HQ registrar pool: the targets to try for one REGISTER, in
// order ("udp:198.18.1.10:5060", "tcp:hq.example:5060" or plain
// "host:port"), and the outcome of each attempt (status 0 = no final
// response) so that passive health learns from registrations too. It has
// the shape of the B2BUA's Trunk, so the gateway's HQ trunk (RFC 3263
// resolution ordered by health.Tracker.Pick) serves both.
type Trunk interface {
	Targets(ctx context.Context) ([]string, error)
	Report(target string, status int, err error)
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
)

// Config is the upstream registration's part of the document. Zero fields
// mean defaults.
type Config struct {
	// Trunk gives the HQ targets (required).
	Trunk Trunk
	// Transport is used for targets given without a "udp:"/"tcp:"/"tls:"
	// prefix: "udp" (default), "tcp" or "tls".
	Transport string
	// ContactHost is the "host:port" at which HQ reaches the box; every
	// upstream binding is Contact: <sip:EXTENSION@ContactHost> (required).
	ContactHost string
	// LocalAddr is the "ip:port" of the box's UDP listener that requests
	// leave from (sip.Request.Laddr). Empty lets sipgo choose a socket,
	// which is only right for a box with one listener.
	LocalAddr string
	// Domain is the site's SIP domain: the address of record registered
	// for a user is sip:EXTENSION@Domain, and the Request-URI is
	// sip:Domain (RFC 3261 §10.2) (required).
	Domain string
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
}

// settings is a validated Config with defaults applied.
type settings struct {
	trunk         Trunk
	transport     string // "UDP", "TCP", "TLS"
	contactHost   string
	contactPort   int
	laddr         *sip.Addr // nil: sipgo chooses
	localAddr     string
	domain        string
	username      string
	password      string
	expires       int // seconds
	interval      time.Duration
	workers       int
	timeout       time.Duration
	retryInterval time.Duration
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
		username:      c.Username,
		password:      c.Password,
		expires:       int(orDefault(c.Expires, DefaultExpires) / time.Second),
		workers:       c.Workers,
		timeout:       orDefault(c.Timeout, DefaultTimeout),
		retryInterval: orDefault(c.RetryInterval, DefaultRetryInterval),
	}
	if s.trunk == nil {
		return nil, fmt.Errorf("gateway/upstream: no trunk")
	}
	if s.domain == "" || strings.ContainsAny(s.domain, "@:;<> ") {
		return nil, fmt.Errorf("gateway/upstream: domain %q: want a host name", c.Domain)
	}
	tr, ok := transportName(c.Transport)
	if !ok {
		return nil, fmt.Errorf("gateway/upstream: transport %q: want udp, tcp or tls", c.Transport)
	}
	s.transport = tr
	host, port, err := hostPort(c.ContactHost)
	if err != nil {
		return nil, fmt.Errorf("gateway/upstream: contact host: %w", err)
	}
	s.contactHost, s.contactPort = host, port
	if c.LocalAddr != "" {
		host, port, err := hostPort(c.LocalAddr)
		ip := net.ParseIP(host)
		if err == nil && ip == nil {
			err = fmt.Errorf("%q: want ip:port", c.LocalAddr)
		}
		if err != nil {
			return nil, fmt.Errorf("gateway/upstream: local addr: %w", err)
		}
		s.laddr, s.localAddr = &sip.Addr{IP: ip, Port: port}, c.LocalAddr
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
		s.domain == o.domain && s.username == o.username && s.password == o.password &&
		s.expires == o.expires && s.localAddr == o.localAddr
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// transportName maps a configured transport to sipgo's name.
func transportName(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "", "udp":
		return "UDP", true
	case "tcp":
		return "TCP", true
	case "tls":
		return "TLS", true
	}
	return "", false
}

// hostPort splits "host:port" with a port in 1..65535.
func hostPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", s, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("%q: want host:port", s)
	}
	return host, port, nil
}

// target is one parsed Trunk target.
type target struct {
	name      string // as the Trunk gave it, for Report
	transport string // "UDP", "TCP", "TLS"
	dest      string // "host:port"
}

// parseTarget reads "udp:host:port", "tcp:…", "tls:…" or "host:port"
// (then def is the transport).
func parseTarget(name, def string) (target, error) {
	t := target{name: name, transport: def, dest: name}
	if p, rest, ok := strings.Cut(name, ":"); ok {
		if tr, known := transportName(p); known && p != "" {
			t.transport, t.dest = tr, rest
		}
	}
	if _, _, err := hostPort(t.dest); err != nil {
		return target{}, err
	}
	return t, nil
}
