package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/emiago/sipgo"

	"github.com/outpost/outpost/gateway/facing"
	"github.com/outpost/outpost/gateway/listen"
	"github.com/outpost/outpost/gateway/upstream"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/siptarget"
)

// UpstreamConfig enables upstream registration (hq.register_upstream):
// every extension with a local binding is also registered at HQ with the
// box as its Contact. The HQ targets are the HQ trunk's; the Contact and
// the listener requests leave from are the box's UDP listener facing HQ.
type UpstreamConfig struct {
	Domain             string // site.domain: AORs are sip:EXT@Domain
	Username, Password string // hq.auth_username / auth_password
	Expires            time.Duration
	ReplayRate         float64 // registrations per second; 0 = upstream.DefaultReplayRate
}

// upstreamPart runs the upstream agent on behalf of the Server: built when
// the document asks for it, reconfigured with the document, paused in
// survivable mode, fed by the registrar's presence hook. Its methods are
// called with Server.mu held, except set/remove (from the registrar).
type upstreamPart struct {
	ua  *sipgo.UserAgent
	log *slog.Logger

	mu    sync.Mutex // guards agent for the registrar's hook
	agent *upstream.Agent
	stop  func()
	ctx   context.Context // the Server's Run context; nil = not running
}

func (u *upstreamPart) current() *upstream.Agent {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.agent
}

// presence is the registrar's hook: an extension gained its first binding
// or lost its last one.
func (u *upstreamPart) presence(aor string, present bool) {
	a := u.current()
	switch {
	case a == nil:
	case present:
		a.Set(aor)
	default:
		a.Remove(aor)
	}
}

// apply makes the agent match ucfg (checked by Prepare): built (and
// started, if the Server runs) when upstream registration is enabled,
// reconfigured when it changes, stopped when ucfg is nil. present lists
// the extensions that have local bindings now, for a new agent.
func (u *upstreamPart) apply(ucfg *upstream.Config, present []string, m mode.Mode) {
	if ucfg == nil {
		u.close()
		return
	}
	if a := u.current(); a != nil {
		if err := a.Reconfigure(context.Background(), *ucfg); err != nil {
			u.log.Error("upstream registration: reconfigure refused a checked config", "err", err)
		}
		return
	}
	a, err := upstream.New(u.ua, *ucfg, u.log)
	if err != nil {
		u.log.Error("upstream registration: a checked config refused", "err", err)
		return
	}
	if m == mode.Survivable {
		a.Pause()
	}
	a.Sync(present)
	u.mu.Lock()
	u.agent = a
	u.mu.Unlock()
	if u.ctx != nil {
		u.start()
	}
}

func (u *upstreamPart) run(ctx context.Context) {
	u.ctx = ctx
	if u.current() != nil {
		u.start()
	}
}

func (u *upstreamPart) start() {
	a := u.current()
	ctx, cancel := context.WithCancel(u.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil {
			u.log.Error("upstream registration stopped", "err", err)
		}
	}()
	u.stop = func() { cancel(); <-done }
}

func (u *upstreamPart) close() {
	if u.stop != nil {
		u.stop()
		u.stop = nil
	}
	u.mu.Lock()
	u.agent = nil
	u.mu.Unlock()
}

// mode pauses upstream registration in survivable mode (HQ is unreachable:
// local registration goes on) and resumes it, paced, on failback.
func (u *upstreamPart) mode(m mode.Mode) {
	a := u.current()
	if a == nil {
		return
	}
	if m == mode.Survivable {
		a.Pause()
	} else {
		a.Resume()
	}
}

// upstreamSettings builds the agent's Config: the Contact is the UDP
// listener facing HQ's first target (or Calls.LocalAddr when set), so HQ
// calls the box back on the address it can reach; a wildcard listener
// announces the source address the kernel would use (gateway/facing).
func upstreamSettings(run *running, ls listen.Set) (upstream.Config, error) {
	uc, hq := run.cfg.Upstream, run.hq
	local := run.cfg.Calls.LocalAddr
	dest := hq.FirstDest()
	if local == "" {
		udp := ls.UDPAddrs()
		if dest == "" && len(udp) > 0 {
			dest = udp[0].String()
		}
		if i := facing.Pick(udp, dest, facing.Kernel); i >= 0 {
			local = facing.Announce(udp[i], dest, facing.Kernel).String()
		}
	}
	if local == "" {
		return upstream.Config{}, fmt.Errorf("gateway: upstream registration needs a UDP listener")
	}
	contact := local
	if tr := hq.Transport(); tr == siptarget.TCP || tr == siptarget.TLS {
		// Over TCP or TLS the Contact names the box's listener of that
		// transport (with the transport parameter), so that HQ's calls
		// come back over it; the REGISTER itself leaves from an ephemeral
		// port. Without such a listener, the UDP one.
		if a := run.local.stream(tr.SIPName(), dest); a != nil {
			contact = a.String()
		}
	}
	return upstream.Config{Trunk: hq, Transport: hq.Transport(), ContactHost: contact, LocalAddr: local,
		Domain: uc.Domain, Registrar: hq.Domain(), Username: uc.Username, Password: uc.Password, Expires: uc.Expires, ReplayRate: uc.ReplayRate,
		Recheck: hq.ProbeInterval()}, nil // a target's health changes at most once per probe
}

// Upstream is the state of every upstream registration (nil when off).
func (s *Server) Upstream() []upstream.Entry {
	if a := s.up.current(); a != nil {
		return a.Status()
	}
	return nil
}
