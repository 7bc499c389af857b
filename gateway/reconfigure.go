package gateway

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/hqtrunk"
	"github.com/outpost/outpost/gateway/listen"
	"github.com/outpost/outpost/gateway/pool"
	"github.com/outpost/outpost/gateway/registrar"
	"github.com/outpost/outpost/gateway/trace"
	"github.com/outpost/outpost/gateway/upstream"
)

// Change is a reconfiguration of the Server that Prepare has checked and
// made ready (new listeners bound but not served, a new HQ trunk built but
// not probing, the registrar's and the B2BUA's new settings built) without
// changing what runs. Commit makes it run and cannot fail; Abort releases
// what Prepare took. Exactly one of them must be called, and no other
// Prepare or Reconfigure may happen in between (the appliance serialises
// its applies).
type Change struct {
	s        *Server
	cfg      Config
	plan     *dialplan.Plan
	hq       *hqtrunk.Trunk
	pstn     *pstnHealth
	b2b      func()
	reg      *registrar.Change
	next     listen.Set       // every listener of cfg: kept ones and new ones
	running  listen.Set       // the listeners when Prepare began
	upstream *upstream.Config // nil = no upstream registration
	hep      *trace.Exporter  // the new HEP exporter, when the capture section changed
	hepNew   bool
	pool     *pool.Pool // the registrar pool (the running one when its section did not change)
	tlsCert  *tls.Certificate
}

// Prepare does every fallible step of applying cfg: compiling the dial
// plan, building the HQ trunk (when its section changed), checking the
// B2BUA's and the registrar's settings, binding the listeners cfg adds and
// working out the upstream registration's settings.
//
// It holds no lock of the Server while it works (building a trunk may wait
// a second for DNS), so calls and probes go on undisturbed.
func (s *Server) Prepare(ctx context.Context, cfg Config) (*Change, error) {
	s.mu.Lock()
	running, hq, pstn, pl := s.listeners, s.hq, s.pstn, s.pool.cur
	s.mu.Unlock()
	c := &Change{s: s, cfg: cfg, running: running}
	var err error
	if c.tlsCert, err = cfg.TLS.parse(cfg.Listen); err != nil {
		return nil, err
	}
	if c.hepNew = cfg.Capture != s.cfg.Load().Capture; c.hepNew {
		if c.hep, err = s.newExporter(cfg.Capture); err != nil {
			return nil, err
		}
	}
	if c.plan, err = dialplan.Compile(cfg.Dialplan); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if c.hq, err = hqtrunk.Next(hq, cfg.HQTrunk); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if c.hq != nil && c.hq != hq {
		c.hq.UseDialer(s.hqDial)
	}
	c.pstn = nextPSTN(pstn, cfg)
	if c.pool, err = nextPool(pl, cfg); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if c.b2b, err = s.b2b.Prepare(cfg.b2buaConfig(c.hq, c.pstn, s.survivableWarning, &s.local, s.signPool)); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if c.reg, err = s.reg.Prepare(cfg.Registrar); err != nil {
		return nil, err
	}
	if c.next, err = listen.BindAll(cfg.Listen, s.listenOptions(cfg), running); err != nil {
		return nil, err
	}
	if c.upstream, err = checkedUpstream(cfg, c.hq, c.next); err != nil {
		c.closeNew()
		return nil, err
	}
	return c, nil
}

// Commit makes the prepared configuration run: the next call uses the new
// plan and settings (calls in progress keep theirs), new listeners are
// served, listeners that are gone are closed (unchanged ones keep their
// sockets), probing moves to a new HQ trunk and upstream registration
// follows.
func (c *Change) Commit() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c.b2b()
	c.reg.Commit()
	s.tlsCert.Store(c.tlsCert)
	for k, l := range s.listeners {
		if c.next[k] == nil {
			l.Close()
			s.log.Info("sip listener closed", "listener", l.Bound)
		}
	}
	for k, l := range c.next {
		if s.listeners[k] == nil {
			s.serve(l)
			s.log.Info("sip listening", "listener", l.Bound)
		}
	}
	s.listeners = c.next
	s.fp.SetSockets(c.next.UDP())
	s.plan.Store(c.plan)
	s.fp.SetRefusalRate(c.cfg.refusalRate())
	s.local.set(c.cfg, c.next)
	s.probe.Swap(s.hq, c.hq, s.log)
	s.hq = c.hq
	s.hqNow.Store(c.hq)
	s.pstn.close()
	c.pstn.start(s.probe.Context(), s.pstn, s.probe.Pinger(nil), s.log.With("part", "pstn-probe"))
	s.pstn = c.pstn
	s.pstnNow.Store(c.pstn)
	s.cfg.Store(&c.cfg)
	s.pool.swap(s, c.pool)
	s.up.apply(c.upstream, s.reg.Present(), *s.mode.Load())
	if c.hepNew {
		s.capture.swap(c.hep)
	}
}

// Abort closes the listeners Prepare bound; nothing else was started.
func (c *Change) Abort() { c.closeNew() }

func (c *Change) closeNew() { c.next.CloseNew(c.running) }

// checkedUpstream is the upstream agent's configuration for cfg, checked;
// nil when cfg asks for no upstream registration.
func checkedUpstream(cfg Config, hq *hqtrunk.Trunk, ls listen.Set) (*upstream.Config, error) {
	if cfg.Upstream == nil || hq == nil {
		return nil, nil
	}
	ucfg, err := upstreamSettings(cfg, hq, ls)
	if err == nil {
		err = ucfg.Check()
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: upstream registration: %w", err)
	}
	return &ucfg, nil
}

// Reconfigure prepares and commits cfg: on error nothing has changed.
func (s *Server) Reconfigure(ctx context.Context, cfg Config) error {
	c, err := s.Prepare(ctx, cfg)
	if err != nil {
		return err
	}
	c.Commit()
	return nil
}
