package msr

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/outpost/outpost/media/selection"
)

// UAStatus is the state of one registration: one UA (announced
// interface) at one server address.
type UAStatus struct {
	Interface string         `json:"interface"`
	Address   netip.Addr     `json:"address"` // announced media address
	Service   bool           `json:"service"` // carries the control-channel fields
	URI       string         `json:"uri"`     // sip:{iface};{contact-id}@{msr-name}
	Contact   string         `json:"contact"`
	Server    string         `json:"server"` // as configured, host:port
	Target    netip.AddrPort `json:"target"` // the resolved address registered at
	// Registered: the last REGISTER was confirmed (2xx with an expiry).
	Registered  bool      `json:"registered"`
	LastStatus  int       `json:"last_status,omitempty"` // last final response code
	LastReason  string    `json:"last_reason,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	Expires     time.Time `json:"expires,omitzero"`      // the registrar's binding lapses
	NextRefresh time.Time `json:"next_refresh,omitzero"` // next REGISTER (refresh or retry)
}

// ServerStatus is one configured server and what it resolved to.
type ServerStatus struct {
	Name  string           `json:"name"`
	Addrs []netip.AddrPort `json:"addrs"`
	Error string           `json:"error,omitempty"`
}

// ServiceStatus is the agent as a whole.
type ServiceStatus struct {
	Enabled   bool       `json:"enabled"`
	Name      string     `json:"name"`
	Interface string     `json:"interface"`
	Address   netip.Addr `json:"address,omitzero"` // service address, if usable
	// Local is the UDP socket every REGISTER leaves from.
	Local   netip.AddrPort `json:"local,omitzero"`
	Servers []ServerStatus `json:"servers"`
	// Announced lists the interfaces that have a UA, the service one first.
	Announced []string `json:"announced"`
	// Problem says why nothing (or not everything) is registered.
	Problem string `json:"problem,omitempty"`
}

// Status returns every registration, the service UA's first, then by
// interface and server address.
func (a *Agent) Status() []UAStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]UAStatus, 0, len(a.uas))
	for _, s := range a.uas {
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y UAStatus) int {
		if x.Service != y.Service {
			if x.Service {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(x.Interface, y.Interface), x.Target.Compare(y.Target))
	})
	return out
}

// Service returns the agent-wide status.
func (a *Agent) Service() ServiceStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.svc
	s.Servers = slices.Clone(s.Servers)
	s.Announced = slices.Clone(s.Announced)
	return s
}

// Control returns the control-channel status.
func (a *Agent) Control() ControlStatus {
	a.mu.Lock()
	ctl, seen, errText := a.ctl, a.ctlSeen, a.ctlError
	a.mu.Unlock()
	st := ControlStatus{Error: errText}
	if ctl != nil {
		st = ctl.status()
		st.Error = errText
	}
	st.Accepted += seen.Accepted
	st.Refused += seen.Refused
	st.Dropped += seen.Dropped
	return st
}

// Resources returns this box's own announced interfaces as media
// resources for media/selection: registered (they are local, whatever
// HQ says), active, never expiring, with the last announced load.
func (a *Agent) Resources() []selection.Entry {
	a.mu.Lock()
	cfg := a.cfg
	a.mu.Unlock()
	seen := map[string]bool{}
	var out []selection.Entry
	for _, s := range a.Status() {
		if seen[s.Interface] {
			continue
		}
		seen[s.Interface] = true
		e := selection.Entry{
			MSR: cfg.Name, AccID: cfg.ContactID, Interface: s.Interface, Addr: s.Address,
			Contact: s.Contact, Zone: cfg.Zone, Site: cfg.Site, Load: int(a.load.Load()),
			Registered: true, Active: true,
		}
		if s.Service {
			if c := a.Control(); c.Listen.IsValid() {
				e.Control = c.Listen
			}
		}
		out = append(out, e)
	}
	return out
}

// report returns the status callback of the binding k.
func (a *Agent) report(k bindingKey) func(UAStatus, bool) {
	return func(s UAStatus, live bool) {
		a.mu.Lock()
		if live {
			a.uas[k] = s
		} else {
			delete(a.uas, k)
		}
		a.mu.Unlock()
		select {
		case a.poke <- struct{}{}:
		default:
		}
	}
}
