package resolve

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// LookupHost resolves a host name that the configuration does not name (a
// redirect's Contact, RFC 3263 §4.2 with the port given: A, then AAAA)
// with the Resolver's servers and cache. An IP literal is its own answer.
func (r *Resolver) LookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if _, ok := dns.IsDomainName(h); !ok || h == "" {
		return nil, fmt.Errorf("gateway/resolve: invalid host %q", host)
	}
	ts, _, err := r.appendHost(ctx, nil, dns.Fqdn(h), h, nil, r.transport, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(ts))
	for i, t := range ts {
		out[i] = t.Addr.Addr()
	}
	return out, nil
}
