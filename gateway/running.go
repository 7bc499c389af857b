package gateway

import (
	"crypto/tls"
	"fmt"
	"slices"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/hqtrunk"
	"github.com/outpost/outpost/gateway/listen"
	"github.com/outpost/outpost/gateway/pool"
	"github.com/outpost/outpost/gateway/upstream"
	"github.com/outpost/outpost/mode"
)

// running is what one push made the Server run: the configuration and
// everything built from it. It is immutable and stored once per commit
// (Server.now), and a request loads it once and works under it to its
// end: the trust check, the route and the dialling of one call all see the
// same push, never half of one. The mode and the LocalChooser are not part
// of it: they change without a push (a request reads the mode once too).
type running struct {
	cfg     Config
	plan    *dialplan.Plan
	hq      *hqtrunk.Trunk // nil = no HQ
	pstn    *pstnHealth    // nil = no PSTN gateway
	pool    *pool.Pool     // nil = one box
	local   *localAddrs    // the listeners requests leave from
	tlsCert *tls.Certificate
	// b2b is the B2BUA's settings of this push: calls admitted under it
	// are set up with them (b2bua.Policy).
	b2b *b2bua.Settings
}

// newRunning builds what cfg runs, given the listeners it bound and the
// parts a push keeps while their section is unchanged (nil = none yet):
// an HQ trunk, PSTN health and a pool keep their state (DNS cache,
// health, blocks) across a push that does not touch them.
func (s *Server) newRunning(cfg Config, ls listen.Set, old *running) (*running, error) {
	r := &running{cfg: cfg, local: newLocalAddrs(cfg, ls, &s.choose)}
	var err error
	if r.tlsCert, err = cfg.TLS.parse(cfg.Listen); err != nil {
		return nil, err
	}
	if r.plan, err = dialplan.Compile(cfg.Dialplan); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	var oldHQ *hqtrunk.Trunk
	var oldPSTN *pstnHealth
	var oldPool *pool.Pool
	if old != nil {
		oldHQ, oldPSTN, oldPool = old.hq, old.pstn, old.pool
	}
	if r.hq, err = hqtrunk.Next(oldHQ, cfg.HQTrunk); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if r.hq != nil && r.hq != oldHQ {
		r.hq.UseDialer(s.hqDial)
	}
	r.pstn = nextPSTN(oldPSTN, cfg)
	if r.pool, err = nextPool(oldPool, cfg); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if r.b2b, err = b2bua.Prepare(r.b2buaConfig(s.mode.Load, s.offline.keepFunc())); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return r, nil
}

// The HQ trunk prepares the B legs' and upstream REGISTERs' TLS connections.
var (
	_ b2bua.Connector        = (*hqtrunk.Trunk)(nil)
	_ b2bua.TLSRedirector    = (*hqtrunk.Trunk)(nil)
	_ upstream.Connector     = (*hqtrunk.Trunk)(nil)
	_ upstream.TLSRedirector = (*hqtrunk.Trunk)(nil)
)

// b2buaConfig is the B2BUA's configuration under r: its HQ trunk, PSTN
// gateways and health, the listeners its legs leave from and the pool's
// signature all of this push; the Warning of the mode at each answer;
// keep, the store-and-forward of messages (nil = off).
func (r *running) b2buaConfig(m func() *mode.Mode, keep func(b2bua.OfflineMessage) error) b2bua.Config {
	bc := r.cfg.Calls
	bc.Offline = keep
	bc.SignPool = r.signPool
	bc.LocalFor = r.local.from
	bc.StreamFor = r.local.stream
	bc.PSTNHealth = r.pstn.tracker()
	bc.Warning = func() string { return r.warning(*m()) }
	bc.PSTNGateways = nil
	for _, g := range r.cfg.PSTN {
		bc.PSTNGateways = append(bc.PSTNGateways, g.Target)
	}
	bc.HQ = nil
	if r.hq != nil { // not a typed nil in the interface
		bc.HQ = r.hq
	}
	return bc
}

// policy is what a call admitted under r in mode m is set up with.
func (r *running) policy(m mode.Mode) b2bua.Policy {
	return b2bua.Policy{Settings: r.b2b, Router: router{r, m}}
}

// policy is the B2BUA's Follow: the policy of a new call the B2BUA makes
// itself (a transfer's bridge), under what runs now.
func (s *Server) policy() b2bua.Policy { return s.now.Load().policy(s.Mode()) }

// Mode is the mode new calls are routed in.
func (s *Server) Mode() mode.Mode { return *s.mode.Load() }

// router routes one call with the plan of the push it was admitted under,
// in the mode it was admitted in (the b2bua's Router and HQFallback).
type router struct {
	run  *running
	mode mode.Mode
}

func (r router) Outbound(number string) (dialplan.Decision, bool) {
	return r.run.plan.Outbound(number, r.mode)
}

// Voicemail routes the pilot for ext when ext's voicemail is the pilot:
// always for hq, in normal mode for fallback.
func (r router) Voicemail(ext string) (dialplan.Decision, bool) {
	vm := r.run.cfg.Voicemail
	if vm.Pilot == "" || !slices.Contains(vm.Users, ext) || r.mode != mode.Normal && slices.Contains(vm.Fallback, ext) {
		return dialplan.Decision{}, false
	}
	d, ok := r.Outbound(vm.Pilot)
	if !ok || d.Route == "" || d.Route == dialplan.RouteLocal && d.Target == ext {
		return dialplan.Decision{}, false // no route, or back to the same phone
	}
	return d, true
}

// BoxVoicemail is b2bua.BoxVoicemail: local voicemail now; fallback now
// when the pilot is not used (see Voicemail), else after it failed.
func (r router) BoxVoicemail(ext string) (now, onPilotFailure bool) {
	vm := r.run.cfg.Voicemail
	switch {
	case slices.Contains(vm.Local, ext):
		return true, false
	case slices.Contains(vm.Fallback, ext):
		_, pilot := r.Voicemail(ext)
		return !pilot, pilot
	}
	return false, false
}

// HQFallback is the per-call fallback the B2BUA asks for (b2bua.HQFallback)
// when every HQ target of a call failed by the retry rule: the route the
// number takes in survivable mode (the rule's survivable alternative or
// the pstn_prefix fallback), if hq.call_fallback is on and that route is
// not HQ again. The mode is not changed: the probes decide that.
func (r router) HQFallback(number string) (dialplan.Decision, bool) {
	if hq := r.run.cfg.HQTrunk; hq == nil || !hq.CallFallback {
		return dialplan.Decision{}, false
	}
	d, ok := r.run.plan.Outbound(number, mode.Survivable)
	if !ok || d.Route == "" || d.Route == dialplan.RouteHQ {
		return dialplan.Decision{}, false
	}
	return d, true
}

// signPool is the B2BUA's SignPool (pool.go).
func (r *running) signPool(req *sip.Request) { signPool(r.pool, req) }
