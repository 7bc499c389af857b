package appliance

import (
	"context"
	"path"
	"slices"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/netcfg"
)

// Interfaces reports the kernel's links (from the netcfg watcher's newest
// snapshot, not a fresh netlink dump: the API never waits on the kernel) and
// the role the active document gives each.
func (a *App) Interfaces(context.Context) api.Interfaces {
	parts := a.running().parts
	st := a.net.State()
	defaults := map[string]bool{}
	for _, r := range st.DefaultRoutes() {
		defaults[r.LinkName] = true
	}
	out := api.Interfaces{Links: []api.Link{}}
	for _, l := range st.Links {
		al := api.Link{Name: l.Name, Index: l.Index, Kind: l.Kind, Up: l.Up, Carrier: l.Carrier, MTU: l.MTU,
			VLANID: l.VLANID, Parent: l.Parent, Addrs: []string{}, Roles: linkRoles(parts, l, defaults[l.Name])}
		for _, p := range st.AddrsOf(l.Name) {
			al.Addrs = append(al.Addrs, p.String())
		}
		out.Links = append(out.Links, al)
	}
	slices.SortFunc(out.Links, func(x, y api.Link) int { return x.Index - y.Index })
	out.MSR, out.ControlChannel = a.msrStatus()
	return out
}

func linkRoles(parts *partConfigs, l netcfg.Link, defaultRoute bool) []string {
	var roles []string
	if parts.WAN != "" && parts.WAN == l.Name {
		roles = append(roles, "wan")
	}
	if defaultRoute {
		roles = append(roles, "default-route")
	}
	if m := parts.MSR; m.Enabled && !l.Loopback {
		if m.ServiceInterface == l.Name {
			roles = append(roles, "msr-service")
		}
		for _, g := range m.Interfaces {
			if ok, _ := path.Match(g, l.Name); ok {
				roles = append(roles, "msr")
				break
			}
		}
	}
	return roles
}
