package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/health"
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
	// host is the Request-URI host of a probe to target: the HQ domain
	// for an HQ target (hqTrunk.RequestHost); "" = the target's address.
	host func(target string) string
	// connect opens a TLS connection to target first (Server.connectHQ).
	connect func(ctx context.Context, target string) error
}

func (p optionsPinger) Ping(ctx context.Context, target string) (time.Duration, error) {
	g, err := siptarget.Parse(target, siptarget.UDP)
	if err != nil {
		return 0, err
	}
	ruri := sip.Uri{Scheme: "sip", Host: g.Host, Port: int(g.Port)}
	if h := p.host(target); h != "" {
		ruri = sip.Uri{Scheme: "sip", Host: h}
	}
	req := sip.NewRequest(sip.OPTIONS, ruri)
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
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", Host: ruri.Host}})
	start := time.Now()
	if err := p.connect(ctx, target); err != nil {
		return 0, fmt.Errorf("options %s: %w: %w", target, health.ErrNoResponse, err)
	}
	res, err := p.cli.Do(ctx, req)
	if err == nil && res == nil {
		// sipgo ends a transaction whose layer is closing (the Server
		// stopping under a probe in flight) with neither.
		err = errors.New("transaction ended without a response")
	}
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
// and stops it on exit. Its methods are called with Server.mu held. Probes
// leave from the listener facing each target (from: localAddrs.from).
type prober struct {
	ctx     context.Context // the Server's Run context; nil = not running
	cli     *sipgo.Client
	from    func(hostport string) *sip.Addr
	host    func(target string) string
	connect func(ctx context.Context, target string) error
	notify  atomic.Pointer[func(HQTargetEvent)]
}

// OnHQTarget sets the function told every HQ target verdict (a new target,
// probes took it down or brought it up, or it left the target set) and
// every pool that could not be resolved or resolved again, for the mode
// logic.
// It is called from the prober's goroutine and must not block for long.
func (s *Server) OnHQTarget(f func(HQTargetEvent)) { s.probe.notify.Store(&f) }

func (p *prober) tell(ev HQTargetEvent) {
	if f := p.notify.Load(); f != nil {
		(*f)(ev)
	}
}

func (p *prober) init(ua *sipgo.UserAgent, from func(hostport string) *sip.Addr, host func(target string) string,
	connect func(ctx context.Context, target string) error) {
	p.cli, _ = sipgo.NewClient(ua) // NewClient fails only on bad options
	p.from, p.host, p.connect = from, host, connect
}

func (p *prober) pinger() health.Pinger {
	return optionsPinger{cli: p.cli, from: p.from, host: p.host, connect: p.connect}
}

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

// swap moves probing from the old trunk to next (nothing to do when the
// hq section did not change).
func (p *prober) swap(old, next *hqTrunk, log *slog.Logger) {
	if old == next {
		return
	}
	old.close()
	if old != nil {
		for _, ev := range old.forget("hq section changed") {
			p.tell(ev)
		}
	}
	if p.ctx != nil && next != nil {
		next.start(p.ctx, p.pinger(), p.tell, log.With("part", "hq-probe"))
	}
}
