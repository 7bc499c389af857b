package gateway

import (
	"context"
	"fmt"

	"github.com/outpost/outpost/gateway/listen"
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
	run      *running // what cfg runs: built, not yet stored
	reg      *registrar.Change
	next     listen.Set       // every listener of cfg: kept ones and new ones
	running  listen.Set       // the listeners when Prepare began
	upstream *upstream.Config // nil = no upstream registration
	hep      *trace.Exporter  // the new HEP exporter, when the capture section changed
	hepNew   bool
}

// Prepare does every fallible step of applying cfg: binding the listeners
// cfg adds, building what it runs (the dial plan compiled, the HQ trunk
// when its section changed, the B2BUA's settings), checking the
// registrar's settings and working out the upstream registration's.
//
// It holds no lock of the Server while it works (building a trunk may wait
// a second for DNS), so calls and probes go on undisturbed.
func (s *Server) Prepare(ctx context.Context, cfg Config) (*Change, error) {
	s.mu.Lock()
	listening, old := s.listeners, s.now.Load()
	s.mu.Unlock()
	c := &Change{s: s, running: listening}
	var err error
	if _, err = cfg.TLS.parse(cfg.Listen); err != nil {
		return nil, err // before anything is bound
	}
	if c.hepNew = cfg.Capture != old.cfg.Capture; c.hepNew {
		if c.hep, err = s.newExporter(cfg.Capture); err != nil {
			return nil, err
		}
	}
	if c.reg, err = s.reg.Prepare(cfg.Registrar); err != nil {
		return nil, err
	}
	if c.next, err = listen.BindAll(cfg.Listen, s.listenOptions(cfg), listening); err != nil {
		return nil, err
	}
	if c.run, err = s.newRunning(cfg, c.next, old); err == nil {
		c.upstream, err = checkedUpstream(c.run, c.next)
	}
	if err != nil {
		c.closeNew()
		return nil, err
	}
	return c, nil
}

// Commit makes the prepared configuration run: the next request works
// under it (calls in progress keep what they started with), new listeners
// are served, listeners that are gone are closed (unchanged ones keep
// their sockets), probing moves to a new HQ trunk and upstream
// registration follows.
func (c *Change) Commit() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.now.Load()
	c.reg.Commit()
	s.now.Store(c.run) // first: a request on a new listener works under what it serves
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
	s.fp.SetRefusalRate(c.run.cfg.refusalRate())
	s.probe.Swap(old.hq, c.run.hq, s.log)
	old.pstn.close()
	c.run.pstn.start(s.probe.Context(), old.pstn, s.probe.Pinger(nil), s.log.With("part", "pstn-probe"))
	s.pool.swap(s, c.run.pool)
	s.up.apply(c.upstream, s.reg.Present(), s.Mode())
	if c.hepNew {
		s.capture.swap(c.hep)
	}
}

// Abort closes the listeners Prepare bound; nothing else was started.
func (c *Change) Abort() { c.closeNew() }

func (c *Change) closeNew() { c.next.CloseNew(c.running) }

// checkedUpstream is the upstream agent's configuration for cfg, checked;
// nil when cfg asks for no upstream registration.
func checkedUpstream(run *running, ls listen.Set) (*upstream.Config, error) {
	if run.cfg.Upstream == nil || run.hq == nil {
		return nil, nil
	}
	ucfg, err := upstreamSettings(run, ls)
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
