package appliance

import (
	"context"
	"time"

	"github.com/outpost/outpost/gateway"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/netcfg"
)

// The mode logic's inputs and outputs (docs/design.md §1). Inputs: the WAN
// interface's link, carrier and default routes from netcfg (sub-second:
// netlink events, debounced), and the HQ targets' probe verdicts from the
// gateway's prober (down_after failed OPTIONS in a row). Outputs: the
// routing mode of new calls (gateway.SetMode) and, with upstream
// registration, its pause and paced replay.

// modePart hands the mode machine its configuration. It cannot fail, so
// it prepares nothing; its commit comes after the gateway's, and tells the
// machine about a new WAN interface's state.
type modePart struct{ a *App }

func (modePart) name() string { return "mode" }

func (p modePart) prepare(_ context.Context, next *partConfigs) (change, error) {
	a := p.a
	oldWAN, newWAN := a.running().doc.WAN.Interface, next.WAN
	cfg := next.Mode
	return funcs{commit: func() {
		_ = a.mode.Reconfigure(context.Background(), cfg)
		if oldWAN != newWAN {
			a.reseedWAN(newWAN)
		}
		// The machine has taken the configuration (standalone without HQ,
		// normal with a new HQ): new calls route in its mode at once.
		a.gw.SetMode(a.mode.Mode())
	}}, nil
}

// hqTargetEvent turns a prober verdict into a mode event: a target's
// verdict, or a pool that cannot be resolved (no target ever known: an
// outage) or is resolved again.
func hqTargetEvent(ev gateway.HQTargetEvent) mode.Event {
	switch {
	case ev.Unresolved:
		return mode.Event{Kind: mode.PoolUnresolved, Target: ev.Pool, At: ev.At}
	case ev.Resolved:
		return mode.Event{Kind: mode.PoolResolved, Target: ev.Pool, At: ev.At}
	}
	k := mode.TargetDown
	switch {
	case ev.Gone:
		k = mode.TargetGone
	case ev.Up:
		k = mode.TargetUp
	}
	return mode.Event{Kind: k, Target: ev.Target, At: ev.At}
}

// wanEvents picks the events about the WAN interface out of one netcfg
// batch. A WAN that is renamed away or removed is down; a default route is
// named by destination and gateway so IPv4 and IPv6 routes count apart.
func wanEvents(batch []netcfg.Event, wan string, at time.Time) []mode.Event {
	if wan == "" {
		return nil
	}
	var out []mode.Event
	add := func(k mode.Kind, route string) { out = append(out, mode.Event{Kind: k, At: at, Route: route}) }
	for _, ev := range batch {
		if ev.Kind == netcfg.LinkChanged && ev.Prev.Name == wan && ev.Link.Name != wan {
			add(mode.LinkDown, "")
			continue
		}
		if ev.Link.Name != wan {
			continue
		}
		switch ev.Kind {
		case netcfg.LinkAdded, netcfg.LinkChanged:
			// A late subscriber gets the whole state as additions; the
			// link's flags say where it stands (events are levels).
			add(map[bool]mode.Kind{true: mode.LinkUp, false: mode.LinkDown}[ev.Link.Up], "")
			add(map[bool]mode.Kind{true: mode.CarrierUp, false: mode.CarrierDown}[ev.Link.Carrier], "")
		case netcfg.LinkUp:
			add(mode.LinkUp, "")
		case netcfg.LinkDown, netcfg.LinkRemoved:
			add(mode.LinkDown, "")
		case netcfg.CarrierUp:
			add(mode.CarrierUp, "")
		case netcfg.CarrierDown:
			add(mode.CarrierDown, "")
		case netcfg.DefaultRouteAdded:
			add(mode.RouteAdded, routeName(ev.Route))
		case netcfg.DefaultRouteRemoved:
			add(mode.RouteRemoved, routeName(ev.Route))
		}
	}
	return out
}

func routeName(r netcfg.Route) string {
	s := r.Dst.String()
	if r.Gateway.IsValid() {
		s += " via " + r.Gateway.String()
	}
	return s
}

// runMode feeds the mode machine and applies its decisions until ctx ends.
// The caller owns the goroutine.
// Address changes go to followAddresses through rebind (capacity one: a
// burst of changes is one rebind).
func (a *App) runMode(ctx context.Context, rebind chan<- struct{}) {
	netCh, unsubNet := a.net.Subscribe(16)
	defer unsubNet()
	trCh, unsubTr := a.mode.Subscribe()
	defer unsubTr()
	for {
		select {
		case <-ctx.Done():
			return
		case batch, ok := <-netCh:
			if !ok {
				return
			}
			wan := a.running().doc.WAN.Interface
			for _, ev := range wanEvents(batch, wan, time.Now()) {
				a.mode.Send(ev)
			}
			if addressesChanged(batch) {
				select {
				case rebind <- struct{}{}:
				default: // one is pending already
				}
			}
		case _, ok := <-trCh:
			if !ok {
				return
			}
			// Act on the truth, not on the transition (a slow reader may
			// miss some); the driver has logged it with its reason.
			a.gw.SetMode(a.mode.Mode())
		}
	}
}

// reseedWAN tells the machine that the WAN is now another interface, and
// that interface's state: the old one's facts (its routes above all) must
// not keep counting.
func (a *App) reseedWAN(wan string) {
	a.mode.Send(mode.Event{Kind: mode.WANReset})
	if wan == "" {
		return
	}
	st := a.net.State()
	l, ok := st.Link(wan)
	if !ok {
		a.mode.Send(mode.Event{Kind: mode.LinkDown}) // configured but absent
		return
	}
	batch := []netcfg.Event{{Kind: netcfg.LinkAdded, Link: l}}
	for _, r := range st.DefaultRoutes() {
		if r.LinkName == wan {
			batch = append(batch, netcfg.Event{Kind: netcfg.DefaultRouteAdded, Link: l, Route: r})
		}
	}
	for _, ev := range wanEvents(batch, wan, time.Now()) {
		a.mode.Send(ev)
	}
}
