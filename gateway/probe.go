package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/siptarget"
)

// optionsPinger is the health.Pinger of the HQ prober: one out-of-dialog
// OPTIONS per probe. Any final answer below 500 means the target is alive
// (a 404 or 405 is still a SIP stack answering); a 5xx or no answer within
// the probe's timeout is a failure.
type optionsPinger struct {
	cli *sipgo.Client
	// from picks the UDP listener a probe to hostport leaves from, so HQ
	// sees the box's address on the interface that faces it in Via and
	// answers there (sipgo would otherwise open an ephemeral socket with
	// Via 0.0.0.0). nil = let sipgo choose.
	from func(hostport string) *sip.Addr
}

func (p optionsPinger) Ping(ctx context.Context, target string) (time.Duration, error) {
	g, err := siptarget.Parse(target, siptarget.UDP)
	if err != nil {
		return 0, err
	}
	req := sip.NewRequest(sip.OPTIONS, sip.Uri{Scheme: "sip", Host: g.Host, Port: int(g.Port)})
	req.SetTransport(g.Transport.SIPName())
	req.SetDestination(g.HostPort())
	fromHost := "outpost.invalid"
	if a := p.from(g.HostPort()); a != nil && g.Transport == siptarget.UDP {
		req.Laddr = sip.Addr{IP: a.IP, Port: a.Port}
		fromHost = a.IP.String()
	}
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "outpost", Host: fromHost}}
	from.Params.Add("tag", sip.GenerateTagN(12))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", Host: g.Host}})
	start := time.Now()
	res, err := p.cli.Do(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("options %s: %w: %w", target, health.ErrNoResponse, err)
	}
	if res.StatusCode >= 500 {
		return 0, fmt.Errorf("options %s: %d %s", target, res.StatusCode, res.Reason)
	}
	return time.Since(start), nil
}

// prober owns the HQ trunk's OPTIONS prober on behalf of the Server: it
// starts it when the Server runs, moves it to a new trunk on Reconfigure
// and stops it on exit. Its methods are called with Server.mu held.
type prober struct {
	ctx    context.Context // the Server's Run context; nil = not running
	cli    *sipgo.Client
	fixed  atomic.Pointer[sip.Addr]   // Calls.LocalAddr, when configured
	udp    atomic.Pointer[[]sip.Addr] // the UDP listeners, sorted
	notify atomic.Pointer[func(HQTargetEvent)]
	choose atomic.Pointer[LocalChooser]
}

// OnHQTarget sets the function told every HQ target verdict (probes took it
// down or brought it up, or it left the target set), for the mode logic.
// It is called from the prober's goroutine and must not block for long.
func (s *Server) OnHQTarget(f func(HQTargetEvent)) { s.probe.notify.Store(&f) }

func (p *prober) tell(ev HQTargetEvent) {
	if f := p.notify.Load(); f != nil {
		(*f)(ev)
	}
}

func (p *prober) init(ua *sipgo.UserAgent, cfg Config, ls map[Listen]*listener) {
	p.cli, _ = sipgo.NewClient(ua) // NewClient fails only on bad options
	p.setFrom(cfg, ls)
}

// setFrom records the listeners probes may leave from: the B2BUA's
// LocalAddr when set (the address HQ knows the box by), else the UDP
// listener on the interface facing each target (see facing).
func (p *prober) setFrom(cfg Config, ls map[Listen]*listener) {
	p.fixed.Store(nil)
	if a := cfg.Calls.LocalAddr; a != "" {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			p.fixed.Store(&sip.Addr{IP: ap.Addr().AsSlice(), Port: int(ap.Port())})
		}
	}
	var udp []sip.Addr
	for _, l := range ls {
		if ua, ok := l.pc.(interface{ LocalAddr() net.Addr }); ok && l.pc != nil {
			if a, ok := ua.LocalAddr().(*net.UDPAddr); ok {
				udp = append(udp, sip.Addr{IP: a.IP, Port: a.Port})
			}
		}
	}
	slices.SortFunc(udp, func(x, y sip.Addr) int { return strings.Compare(x.String(), y.String()) })
	p.udp.Store(&udp)
}

func (p *prober) from(hostport string) *sip.Addr {
	if a := p.fixed.Load(); a != nil {
		return a
	}
	ls := p.udp.Load()
	if ls == nil {
		return nil
	}
	if f := p.choose.Load(); f != nil {
		if a := chosen(*ls, hostport, *f); a != nil {
			return a
		}
	}
	return facing(*ls, hostport)
}

// LocalChooser picks, among the box's listener addresses, the one that
// faces dest when several can (media resource selection: the appliance
// knows the interfaces' subnets and loads); ok false leaves the choice to
// the routing table (facing).
type LocalChooser func(dest netip.Addr, candidates []netip.Addr) (netip.Addr, bool)

// SetLocalChooser installs the chooser consulted for every B leg, probe
// and upstream registration.
func (s *Server) SetLocalChooser(f LocalChooser) { s.probe.choose.Store(&f) }

// chosen asks f among the specific (non-wildcard) listeners.
func chosen(ls []sip.Addr, hostport string, f LocalChooser) *sip.Addr {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil
	}
	dest, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	var cands []netip.Addr
	for _, l := range ls {
		if a, ok := netip.AddrFromSlice(l.IP); ok && !a.IsUnspecified() {
			cands = append(cands, a.Unmap())
		}
	}
	a, ok := f(dest.Unmap(), cands)
	if !ok {
		return nil
	}
	for i := range ls {
		if ip, ok := netip.AddrFromSlice(ls[i].IP); ok && ip.Unmap() == a {
			return &ls[i]
		}
	}
	return nil
}

// facing picks, among the UDP listeners, the one a packet to hostport
// should leave from: the listener bound to the source address the kernel's
// routing table chooses for that destination (learnt by connecting a UDP
// socket, which sends nothing), else a wildcard listener, else the first.
// On a box with a LAN and a WAN listener this keeps requests to HQ on the
// WAN address, where HQ's answers come back.
func facing(ls []sip.Addr, hostport string) *sip.Addr {
	switch len(ls) {
	case 0:
		return nil
	case 1:
		return &ls[0] // nothing to choose: no routing lookup per request
	}
	if c, err := net.Dial("udp", hostport); err == nil {
		src := c.LocalAddr().(*net.UDPAddr).IP
		c.Close()
		for i := range ls {
			if ls[i].IP.Equal(src) {
				return &ls[i]
			}
		}
	}
	for i := range ls {
		if ls[i].IP.IsUnspecified() {
			return &ls[i]
		}
	}
	return &ls[0]
}

func (p *prober) pinger() health.Pinger { return optionsPinger{cli: p.cli, from: p.from} }

func (p *prober) run(ctx context.Context, hq *hqTrunk, log *slog.Logger) {
	p.ctx = ctx
	if hq != nil {
		hq.start(ctx, p.pinger(), p.tell, log.With("part", "hq-probe"))
	}
}

func (p *prober) stop(hq *hqTrunk) {
	hq.close()
	p.ctx = nil
}

// swap moves probing from the old trunk to next (the same trunk when the
// hq section did not change: then only the source address is updated).
func (p *prober) swap(old, next *hqTrunk, cfg Config, ls map[Listen]*listener, log *slog.Logger) {
	p.setFrom(cfg, ls)
	if old == next {
		return
	}
	old.close()
	if old != nil {
		for _, t := range old.Health() {
			p.tell(HQTargetEvent{Target: t.Target, Gone: true, Reason: "hq section changed", At: time.Now()})
		}
	}
	if p.ctx != nil && next != nil {
		next.start(p.ctx, p.pinger(), p.tell, log.With("part", "hq-probe"))
	}
}

// HQHealth is the health of every HQ target (nil without HQ): for
// outpostctl status, metrics and the mode logic.
func (s *Server) HQHealth() []health.TargetState {
	if hq := s.hqNow.Load(); hq != nil {
		return hq.Health()
	}
	return nil
}

// SetMode makes m the mode new calls are routed in; calls in progress keep
// the route they took. Upstream registration pauses in survivable mode and
// resumes, paced, on failback. Config.Mode is the mode of a new Server
// only: afterwards the appliance's mode logic sets it.
func (s *Server) SetMode(m mode.Mode) {
	s.mode.Store(&m)
	s.up.mode(m)
}
