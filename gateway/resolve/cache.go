package resolve

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

type cacheKey struct {
	name  string // lower-case FQDN
	qtype uint16
}

type srvRec struct {
	target   string // lower-case FQDN ("." = no service)
	host     string // target without the trailing dot
	port     uint16
	priority uint16
	weight   uint16
}

// entry is one cached answer. Entries are immutable once stored; a change
// (refresh, marking stale) replaces the pointer in the map.
type entry struct {
	nx      bool                    // NXDOMAIN
	addrs   []netip.Addr            // A or AAAA answer
	srvs    []srvRec                // SRV answer
	extra   map[string][]netip.Addr // SRV additional section: target FQDN → A then AAAA
	expires time.Time               // fresh until then
	stale   bool                    // served after a failed refresh
	retryAt time.Time               // stale: do not ask DNS again before this
}

func (e *entry) addrsPerTarget() int {
	if len(e.extra) == 0 {
		return 1
	}
	n := 0
	for _, a := range e.extra {
		n = max(n, len(a))
	}
	return n
}

type call struct {
	done  chan struct{}
	e     *entry
	stale bool
	err   error

	leaderGaveUp bool // err is the leader's context error
}

// lookup returns the answer for (name, qtype) from the cache or from DNS.
// stale is true when an expired entry is served because DNS failed.
func (r *Resolver) lookup(ctx context.Context, name string, qtype uint16) (*entry, bool, error) {
	k := cacheKey{name, qtype}
	for {
		now := r.now()
		r.mu.Lock()
		e := r.cache[k]
		if e != nil {
			if now.Before(e.expires) {
				r.mu.Unlock()
				return e, false, nil
			}
			if e.stale && now.Before(e.retryAt) {
				r.mu.Unlock()
				return e, true, nil
			}
		}
		if c, ok := r.inflight[k]; ok {
			r.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
			if c.leaderGaveUp && ctx.Err() == nil {
				continue // the leader gave up, we have not: ask again
			}
			return c.e, c.stale, c.err
		}
		c := &call{done: make(chan struct{})}
		r.inflight[k] = c
		r.mu.Unlock()

		c.e, c.stale, c.err = r.refresh(ctx, k, e)
		c.leaderGaveUp = c.err != nil && ctx.Err() != nil

		r.mu.Lock()
		delete(r.inflight, k)
		if c.err == nil {
			r.cache[k] = c.e
		}
		r.mu.Unlock()
		close(c.done)
		return c.e, c.stale, c.err
	}
}

// refresh asks DNS; on failure it falls back to old (the last good answer).
func (r *Resolver) refresh(ctx context.Context, k cacheKey, old *entry) (*entry, bool, error) {
	resp, err := r.exchange(ctx, k.name, k.qtype)
	if err == nil {
		e, perr := r.parse(resp, k)
		if perr == nil {
			return e, false, nil
		}
		err = perr
	}
	if old == nil || ctx.Err() != nil {
		return nil, false, err
	}
	// DNS unreachable or failing: serve the last good answer and do not ask
	// again for MinTTL, so that a dead WAN costs one timeout per MinTTL and
	// not one per call.
	s := *old
	s.stale = true
	s.retryAt = r.now().Add(r.minTTL)
	return &s, true, nil
}

// parse turns a NOERROR/NXDOMAIN response into a cache entry.
func (r *Resolver) parse(m *dns.Msg, k cacheKey) (*entry, error) {
	now := r.now()
	e := &entry{}
	if m.Rcode == dns.RcodeNameError {
		e.nx = true
		e.expires = now.Add(r.negTTL(m))
		return e, nil
	}

	// Follow the CNAME chain from the query name (bounded).
	names := map[string]bool{k.name: true}
	minTTL := uint32(1<<32 - 1)
	for range 8 {
		grew := false
		for _, rr := range m.Answer {
			if c, ok := rr.(*dns.CNAME); ok && names[strings.ToLower(c.Hdr.Name)] {
				t := strings.ToLower(c.Target)
				if !names[t] {
					names[t] = true
					minTTL = min(minTTL, c.Hdr.Ttl)
					grew = true
				}
			}
		}
		if !grew {
			break
		}
	}

	for _, rr := range m.Answer {
		h := rr.Header()
		if h.Rrtype != k.qtype || h.Class != dns.ClassINET || !names[strings.ToLower(h.Name)] {
			continue
		}
		switch v := rr.(type) {
		case *dns.A:
			if a, ok := netip.AddrFromSlice(v.A.To4()); ok {
				e.addrs = append(e.addrs, a)
				minTTL = min(minTTL, h.Ttl)
			}
		case *dns.AAAA:
			if a, ok := netip.AddrFromSlice(v.AAAA.To16()); ok {
				e.addrs = append(e.addrs, a)
				minTTL = min(minTTL, h.Ttl)
			}
		case *dns.SRV:
			t := strings.ToLower(dns.Fqdn(v.Target))
			e.srvs = append(e.srvs, srvRec{
				target: t, host: hostOf(t),
				port: v.Port, priority: v.Priority, weight: v.Weight,
			})
			minTTL = min(minTTL, h.Ttl)
		}
	}

	if len(e.addrs) == 0 && len(e.srvs) == 0 { // NODATA
		e.expires = now.Add(r.negTTL(m))
		return e, nil
	}

	if len(e.srvs) > 0 {
		targets := make(map[string]bool, len(e.srvs))
		for _, s := range e.srvs {
			targets[s.target] = true
		}
		var a4, a6 map[string][]netip.Addr
		for _, rr := range m.Extra {
			h := rr.Header()
			name := strings.ToLower(h.Name)
			if !targets[name] || h.Class != dns.ClassINET {
				continue
			}
			switch v := rr.(type) {
			case *dns.A:
				if a, ok := netip.AddrFromSlice(v.A.To4()); ok {
					if a4 == nil {
						a4 = make(map[string][]netip.Addr)
					}
					a4[name] = append(a4[name], a)
					minTTL = min(minTTL, h.Ttl)
				}
			case *dns.AAAA:
				if a, ok := netip.AddrFromSlice(v.AAAA.To16()); ok {
					if a6 == nil {
						a6 = make(map[string][]netip.Addr)
					}
					a6[name] = append(a6[name], a)
					minTTL = min(minTTL, h.Ttl)
				}
			}
		}
		if a4 != nil || a6 != nil {
			e.extra = make(map[string][]netip.Addr, len(a4)+len(a6))
			for n, a := range a4 {
				e.extra[n] = append(e.extra[n], a...)
			}
			for n, a := range a6 {
				e.extra[n] = append(e.extra[n], a...)
			}
		}
	}
	e.expires = now.Add(r.clamp(time.Duration(minTTL) * time.Second))
	return e, nil
}

// negTTL is the negative-caching lifetime (RFC 2308 §5: min of the SOA TTL and
// its MINIMUM field), clamped; MinTTL without an SOA.
func (r *Resolver) negTTL(m *dns.Msg) time.Duration {
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return r.clamp(time.Duration(min(soa.Hdr.Ttl, soa.Minttl)) * time.Second)
		}
	}
	return r.minTTL
}

func (r *Resolver) clamp(d time.Duration) time.Duration {
	return min(max(d, r.minTTL), r.maxTTL)
}

func hostOf(fqdn string) string {
	if fqdn == "." {
		return fqdn
	}
	return strings.TrimSuffix(fqdn, ".")
}
