package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// ednsSize is the advertised UDP payload size (the DNS flag day 2020 value).
const ednsSize = 1232

var errMismatch = errors.New("response does not match the question")

// exchange asks the servers for (name, qtype), starting with the server that
// answered last and failing over in Config.Servers order. It returns the first
// NOERROR or NXDOMAIN response; any other rcode, a network error or a timeout
// moves on to the next server.
func (r *Resolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(ednsSize, false)

	servers, err := r.serverList()
	if err != nil {
		return nil, err
	}
	n := len(servers)
	start := int(r.pref.Load()) % n
	errs := make([]error, 0, n)
	for i := range n {
		idx := (start + i) % n
		srv := servers[idx]
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		resp, err := r.exchangeOne(ctx, m, srv)
		if err == nil {
			switch resp.Rcode {
			case dns.RcodeSuccess, dns.RcodeNameError:
				r.pref.Store(uint32(idx))
				return resp, nil
			}
			err = &RcodeError{Rcode: resp.Rcode}
		}
		errs = append(errs, fmt.Errorf("server %s: %w", srv, err))
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, &multiError{errs: errs}
}

// serverList is Config.Servers, or else the nameservers of the system
// resolver's configuration (Config.ResolvConf), read now.
func (r *Resolver) serverList() ([]string, error) {
	if len(r.servers) > 0 {
		return r.servers, nil
	}
	servers, err := SystemServers(r.resolv)
	if err != nil {
		return nil, err
	}
	return servers, nil
}

// SystemServers reads the nameservers of a resolv.conf file as "ip:port"
// (port 53; a nameserver written ip:port keeps its port). It fails when
// the file cannot be read or names no usable server.
func SystemServers(path string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("system resolver: %w", err)
	}
	var out []string
	for _, s := range cc.Servers {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			out = append(out, ap.String())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue // a name or garbage: nothing we could ask
		}
		port, _ := strconv.ParseUint(cc.Port, 10, 16)
		if port == 0 {
			port = 53
		}
		out = append(out, netip.AddrPortFrom(a.WithZone(""), uint16(port)).String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("system resolver: no nameserver in %s", path)
	}
	return out, nil
}

// exchangeOne queries one server over UDP and, when the answer is truncated,
// again over TCP.
func (r *Resolver) exchangeOne(ctx context.Context, m *dns.Msg, srv string) (*dns.Msg, error) {
	resp, err := r.exchangeNet(ctx, r.udp, m, srv)
	if err != nil {
		return nil, err
	}
	if resp.Truncated {
		resp, err = r.exchangeNet(ctx, r.tcp, m, srv)
		if err != nil {
			return nil, fmt.Errorf("truncated over UDP, TCP retry: %w", err)
		}
	}
	return resp, nil
}

func (r *Resolver) exchangeNet(ctx context.Context, c *dns.Client, m *dns.Msg, srv string) (*dns.Msg, error) {
	qctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	conn, err := c.DialContext(qctx, srv)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// miekg/dns honours only the context's deadline: unblock the read on
	// cancellation too.
	stop := context.AfterFunc(qctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	resp, _, err := c.ExchangeWithConnContext(qctx, m, conn)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if len(resp.Question) != 1 || resp.Question[0].Qtype != m.Question[0].Qtype ||
		!strings.EqualFold(resp.Question[0].Name, m.Question[0].Name) {
		return nil, errMismatch
	}
	return resp, nil
}

// orderSRV returns the SRV records in the order to try them: by priority,
// lowest first, and within one priority in the order of RFC 2782's weighted
// random selection.
func (r *Resolver) orderSRV(in []srvRec) []srvRec {
	out := slices.Clone(in)
	slices.SortStableFunc(out, func(a, b srvRec) int { return int(a.priority) - int(b.priority) })
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].priority == out[i].priority {
			j++
		}
		r.weightedOrder(out[i:j])
		i = j
	}
	return out
}

// weightedOrder orders one priority group in place per RFC 2782: the records
// are first shuffled (so that equal weights, weight 0 included, come out in
// random order), then those of weight 0 are put at the beginning; repeatedly
// a random number in [0, sum of remaining weights] selects the first record
// whose running sum reaches it, which is removed from the remaining list.
// A weight-0 record is thus picked first with probability 1/(sum+1) while
// weighted records remain; those not picked early follow the weighted ones.
func (r *Resolver) weightedOrder(g []srvRec) {
	if len(g) < 2 {
		return
	}
	for i := len(g) - 1; i > 0; i-- {
		j := r.intN(i + 1)
		g[i], g[j] = g[j], g[i]
	}
	// Stable partition: weight 0 first.
	z := 0
	for i := range g {
		if g[i].weight == 0 {
			s := g[i]
			copy(g[z+1:i+1], g[z:i])
			g[z] = s
			z++
		}
	}
	for k := 0; k < len(g)-1; k++ {
		sum := 0
		for _, s := range g[k:] {
			sum += int(s.weight)
		}
		x := r.intN(sum + 1)
		run := 0
		m := k
		for ; m < len(g); m++ {
			run += int(g[m].weight)
			if run >= x {
				break
			}
		}
		s := g[m]
		copy(g[k+1:m+1], g[k:m])
		g[k] = s
	}
}
