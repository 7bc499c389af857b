package msr

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// Resolver resolves server names; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// target is one address of one configured server.
type target struct {
	server string // as configured
	addr   netip.AddrPort
}

// resolution is the outcome of resolving every server.
type resolution struct {
	targets []target
	errs    map[string]error // server → why it has no addresses
}

// literalTargets returns the targets of servers given as IP literals and
// reports whether every server was one (no lookup needed).
func literalTargets(servers []server) ([]target, bool) {
	var out []target
	all := true
	for _, s := range servers {
		a, err := netip.ParseAddr(s.host)
		if err != nil {
			all = false
			continue
		}
		out = append(out, target{server: s.name, addr: netip.AddrPortFrom(a.Unmap(), s.port)})
	}
	return out, all
}

// resolveServers resolves each server to every address it has (A and
// AAAA): docs/design.md §1 registers at each. A server that fails is reported
// in errs; prev (the last good answer) is kept for it, as the design asks
// for DNS that is unreachable.
func resolveServers(ctx context.Context, r Resolver, servers []server, prev []target) resolution {
	res := resolution{errs: map[string]error{}}
	for _, s := range servers {
		if a, err := netip.ParseAddr(s.host); err == nil {
			res.targets = append(res.targets, target{server: s.name, addr: netip.AddrPortFrom(a.Unmap(), s.port)})
			continue
		}
		addrs, err := r.LookupNetIP(ctx, "ip", s.host)
		if err == nil && len(addrs) == 0 {
			err = fmt.Errorf("no addresses")
		}
		if err != nil {
			res.errs[s.name] = fmt.Errorf("media/msr: resolve %s: %w", s.host, err)
			for _, t := range prev {
				if t.server == s.name {
					res.targets = append(res.targets, t)
				}
			}
			continue
		}
		for _, a := range addrs {
			t := target{server: s.name, addr: netip.AddrPortFrom(a.Unmap(), s.port)}
			if !slices.Contains(res.targets, t) {
				res.targets = append(res.targets, t)
			}
		}
	}
	return res
}

// defaultResolver is net.DefaultResolver.
var defaultResolver Resolver = net.DefaultResolver
