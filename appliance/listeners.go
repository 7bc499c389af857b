package appliance

import (
	"context"
	"net"
	"slices"
	"strconv"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/gateway"
	"github.com/outpost/outpost/netcfg"
)

// listeners turns the listen specs into the gateway's listeners. A spec
// naming an interface ("udp:wan0:5060") or every interface ("udp:*:5060",
// loopback excluded) gives one listener per address the interface has now
// (IPv6 link-local addresses excepted: they need a zone and phones do not
// use them); an interface without an address gives none, until it gets
// one (followAddresses). An address that an explicit spec already binds
// is not bound twice.
func listeners(ls []config.Listen, st netcfg.State) []gateway.Listen {
	var out []gateway.Listen
	have := func(g gateway.Listen) bool { return slices.Contains(out, g) }
	for _, l := range ls {
		if l.Interface == "" {
			if g := (gateway.Listen{Transport: l.Transport, Addr: l.Addr()}); !have(g) {
				out = append(out, g)
			}
		}
	}
	for _, l := range ls {
		if l.Interface == "" {
			continue
		}
		for _, name := range interfacesFor(l.Interface, st) {
			for _, p := range st.AddrsOf(name) {
				a := p.Addr()
				if a.IsLinkLocalUnicast() || a.IsLoopback() {
					continue
				}
				g := gateway.Listen{Transport: l.Transport, Addr: net.JoinHostPort(a.String(), strconv.Itoa(l.Port))}
				if !have(g) {
					out = append(out, g)
				}
			}
		}
	}
	return out
}

func interfacesFor(spec string, st netcfg.State) []string {
	if spec != "*" {
		return []string{spec}
	}
	var names []string
	for _, l := range st.Links {
		if !l.Loopback {
			names = append(names, l.Name)
		}
	}
	slices.Sort(names)
	return names
}

// gatewayConfig is the gateway's section of doc in the current mode and
// network state.
func (a *App) gatewayConfig(doc *config.Document) (gateway.Config, error) {
	cfg, err := gatewayConfig(doc, a.opts.Version, a.routingMode(doc), a.netState())
	cfg.Calls.OnEnd = a.recordCDR
	cfg.Calls.Media = a.media.anchor
	return cfg, err
}

// netState is the newest network state: the watcher's once it has one,
// the snapshot taken at start before.
func (a *App) netState() netcfg.State {
	if st := a.net.State(); len(st.Links) > 0 {
		return st
	}
	return a.net0
}

// firstSnapshot reads the network state once, before the gateway binds
// its first listeners (the watcher has no state until it runs).
func (a *App) firstSnapshot(ctx context.Context) netcfg.State {
	st, err := a.netSrc.Snapshot(ctx)
	if err != nil {
		a.log.Warn("reading network interfaces failed; interface listen specs bind nothing until netlink answers", "err", err)
	}
	return st
}

// followAddresses re-applies the listen specs that name interfaces when
// addresses come and go (a DHCP or PPPoE renewal): new addresses are bound,
// vanished ones closed, the others kept (the gateway never rebinds an
// unchanged listener, so calls on them go on).
func (a *App) followAddresses(ctx context.Context, batch []netcfg.Event) {
	relevant := false
	for _, ev := range batch {
		switch ev.Kind {
		case netcfg.AddrAdded, netcfg.AddrRemoved, netcfg.LinkAdded, netcfg.LinkRemoved, netcfg.LinkChanged:
			relevant = true
		}
	}
	if !relevant {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ls, err := a.doc.SIP.Listeners()
	if err != nil || !slices.ContainsFunc(ls, func(l config.Listen) bool { return l.Interface != "" }) {
		return
	}
	gcfg, err := a.gatewayConfig(a.doc)
	if err != nil {
		return
	}
	before := a.gw.Listeners()
	if err := a.gw.Reconfigure(ctx, gcfg); err != nil {
		a.log.Error("following interface addresses: rebinding SIP listeners failed", "err", err)
		return
	}
	if after := a.gw.Listeners(); !slices.Equal(before, after) {
		a.log.Info("SIP listeners follow the interfaces' addresses", "sip", after, "was", before)
	}
}
