package msr

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"time"

	"github.com/outpost/outpost/media/selection"
	"github.com/outpost/outpost/siptarget"
)

// Defaults of Config (docs/design.md §1, appliance/config's Effective* values).
const (
	DefaultUsername         = "msr"
	DefaultPassword         = "mediaserver"
	DefaultRegisterInterval = 300 * time.Second
	DefaultRetryInterval    = 600 * time.Second
	DefaultControlPort      = 5700
	DefaultHeaderPrefix     = selection.DefaultHeaderPrefix
	DefaultContactID        = "1"
	DefaultServerPort       = 5060
	// DefaultDebounce is the cool-down between the first interface event
	// of a burst and the re-registrations it causes. Longer than the
	// netcfg Watcher's 50 ms: a VLAN being reconfigured typically goes
	// down, loses and gains addresses and comes up in a few hundred ms,
	// and HQ should see the result, not each step.
	DefaultDebounce = 200 * time.Millisecond
	// DefaultTimeout bounds one REGISTER transaction: RFC 3261 Timer F
	// (64 × T1 = 32 s), after which a non-INVITE client transaction gives up.
	DefaultTimeout = 32 * time.Second
	// DefaultControlKeepAlive is the keep-alive used on a control channel
	// before (or without) a SYNC naming one; RFC 6230's transaction
	// timeout is 10 s.
	DefaultControlKeepAlive = 10 * time.Second
	// DefaultControlSyncTimeout is how long a new control connection has
	// to complete SYNC (RFC 6230 §6.1: the first thing the client sends).
	// Half the RFC's 10 s transaction timeout: the softswitch sends SYNC
	// as soon as it is connected, and an idle connection holds a slot.
	DefaultControlSyncTimeout = 5 * time.Second
)

// Config is the msr section of the config document plus a few knobs the
// document does not name. The zero value of every field means its
// default; an Agent with Enabled false runs idle (no UA, no listener).
type Config struct {
	Enabled bool
	// Name is the MSR name: the host part of every UA URI and the value
	// of {prefix}Name. Required when enabled.
	Name string
	// Servers are SIP targets (siptarget: "host", "host:port",
	// "[2001:db8::1]:5060", "udp:…"; port default 5060); udp only. A host
	// name is resolved to every address; each address gets every
	// registration.
	Servers []string
	// ServiceInterface sends every REGISTER and hosts the control
	// channel. Required when enabled (the appliance passes
	// msr.service_interface, default wan.interface).
	ServiceInterface string
	// Interfaces are the names or path.Match globs of the interfaces to
	// announce; empty = ["*"]. The service interface is always announced:
	// it carries the control-channel fields.
	Interfaces []string
	// Username and Password answer digest challenges (default msr /
	// mediaserver).
	Username, Password string
	// RegisterInterval is the re-registration period (default 300 s).
	RegisterInterval time.Duration
	// RetryInterval is the retry period of an unconfirmed UA (default
	// 600 s, deliberately long: docs/design.md §1).
	RetryInterval time.Duration
	// Expires is the expiry asked for in each REGISTER; 0 = twice
	// RegisterInterval, so one lost refresh does not drop the binding.
	Expires time.Duration
	// ControlPort is the control-channel TCP port (default 5700); -1 asks
	// for any free port (tests), which the service UA then announces.
	ControlPort int
	// LocalPort is the UDP port REGISTERs leave from on the service
	// address; 0 = an ephemeral port (5060 is usually the gateway's).
	LocalPort int
	// HeaderPrefix prefixes every MSR header (default "P-Eltex-MSR-").
	HeaderPrefix string
	// ContactID is the {msr-contact-id} of the UA URI and the value of
	// {prefix}Acc-Id (default "1"; the appliance passes msr.contact_id).
	ContactID string
	// Zone and Site, when set, are announced as {prefix}Zone and
	// {prefix}Site (the appliance passes site.zone and site.site) so that
	// a registrar feeding media/selection knows where this MSR stands.
	Zone, Site string
	// Debounce is the cool-down of interface events (default 200 ms).
	Debounce time.Duration
	// Timeout bounds one REGISTER transaction (default 32 s, Timer F).
	Timeout time.Duration
	// ControlKeepAlive is the control channel's keep-alive before SYNC
	// (default 10 s); SYNC's Keep-Alive header replaces it.
	ControlKeepAlive time.Duration
	// ControlAllow are the ranges allowed to open a control channel
	// besides the addresses the Servers resolve to (which always are):
	// for a softswitch whose control connections leave from other
	// addresses than its registrar's. Empty = the servers only.
	ControlAllow []netip.Prefix
	// ControlSyncTimeout is the time a control connection has to complete
	// SYNC before it is closed (default 5 s).
	ControlSyncTimeout time.Duration
	// ControlDialogRequired makes SYNC strict RFC 6230: its Dialog-ID
	// must be the cfw-id of a control dialog set up by INVITE, else 481.
	// False (the default, what ECSS-10 needs: it connects to the announced
	// control port without an INVITE) also accepts a Dialog-ID naming no
	// dialog, as a direct channel.
	ControlDialogRequired bool
}

func orDur(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

func orStr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// withDefaults returns c with every default applied.
func (c Config) withDefaults() Config {
	c.Username = orStr(c.Username, DefaultUsername)
	c.Password = orStr(c.Password, DefaultPassword)
	c.RegisterInterval = orDur(c.RegisterInterval, DefaultRegisterInterval)
	c.RetryInterval = orDur(c.RetryInterval, DefaultRetryInterval)
	c.Expires = orDur(c.Expires, 2*c.RegisterInterval)
	if c.ControlPort == 0 {
		c.ControlPort = DefaultControlPort
	}
	c.HeaderPrefix = orStr(c.HeaderPrefix, DefaultHeaderPrefix)
	c.ContactID = orStr(c.ContactID, DefaultContactID)
	c.Debounce = orDur(c.Debounce, DefaultDebounce)
	c.Timeout = orDur(c.Timeout, DefaultTimeout)
	c.ControlKeepAlive = orDur(c.ControlKeepAlive, DefaultControlKeepAlive)
	c.ControlSyncTimeout = orDur(c.ControlSyncTimeout, DefaultControlSyncTimeout)
	if len(c.Interfaces) == 0 {
		c.Interfaces = []string{"*"}
	}
	return c
}

// server is one configured server, split.
type server struct {
	name string // as configured, "host:port"
	host string
	port uint16
}

// Check reports what New and Reconfigure would refuse in c.
func (c Config) Check() error {
	_, err := c.withDefaults().validate()
	return err
}

// validate checks c (defaults applied) and splits its servers.
func (c Config) validate() ([]server, error) {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	var servers []server
	for i, s := range c.Servers {
		sv, err := splitServer(s)
		if err != nil {
			bad("servers[%d]: %w", i, err)
			continue
		}
		servers = append(servers, sv)
	}
	for i, g := range c.Interfaces {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			bad("interfaces[%d]: bad pattern %q", i, g)
		}
	}
	for i, p := range c.ControlAllow {
		if !p.IsValid() {
			bad("control allow[%d]: not a CIDR", i)
		}
	}
	if c.ControlPort < -1 || c.ControlPort > 65535 {
		bad("control port %d out of range", c.ControlPort)
	}
	if c.LocalPort < 0 || c.LocalPort > 65535 {
		bad("local port %d out of range", c.LocalPort)
	}
	for _, f := range []struct{ name, v string }{
		{"name", c.Name}, {"contact id", c.ContactID}, {"header prefix", c.HeaderPrefix},
		{"username", c.Username}, {"zone", c.Zone}, {"site", c.Site},
	} {
		if strings.ContainsAny(f.v, " \t\r\n:@<>\"") {
			bad("%s %q: no spaces, ':', '@', '<', '>' or quotes", f.name, f.v)
		}
	}
	if c.Enabled {
		if c.Name == "" {
			bad("name required when enabled")
		}
		if len(c.Servers) == 0 {
			bad("at least one server required when enabled")
		}
		if c.ServiceInterface == "" {
			bad("service interface required when enabled")
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("media/msr: config: %w", err)
	}
	return servers, nil
}

// splitServer parses one server (siptarget grammar, udp by default). The
// agent registers over UDP only: a tcp or tls server is refused here
// rather than registered over UDP anyway.
func splitServer(s string) (server, error) {
	t, err := siptarget.Parse(s, siptarget.UDP)
	if err != nil {
		return server{}, err
	}
	if t.Transport != siptarget.UDP {
		return server{}, fmt.Errorf("server %q: transport %s not supported (MSR registers over udp only)", s, t.Transport)
	}
	return server{name: s, host: t.Host, port: t.Port}, nil
}

// announces reports whether the interface name matches the globs.
func (c Config) announces(name string) bool {
	for _, g := range c.Interfaces {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
