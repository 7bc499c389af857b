package msr

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/media/selection"
	"github.com/outpost/outpost/netcfg"
)

// loop is the state owned by Run's goroutine.
type loop struct {
	a       *Agent
	cfg     Config
	servers []server
	st      netcfg.State
	events  <-chan []netcfg.Event

	bctx     context.Context // bindings' hard stop
	tr       *transport
	ctl      *controlServer
	targets  []target
	resErrs  map[string]error
	resolveC chan resolution // the resolution in flight, if any
	resolveT *time.Timer     // next periodic resolution
	debounce netcfg.Debounce // interface events, Config.Debounce
	rebind   <-chan time.Time

	bindings map[bindingKey]*binding
	draining map[bindingKey]chan struct{}
	wg       sync.WaitGroup // bindings, resolutions, closers
}

func (l *loop) run(ctx context.Context) {
	bctx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	l.bctx = bctx
	defer func() {
		// Unregister everything, then close the sockets.
		for k, b := range l.bindings {
			b.remove(l.sender(), false)
			delete(l.bindings, k)
		}
		l.wg.Wait()
		hardStop()
		l.closeTransport()
		l.closeControl()
		if l.a.ms != nil {
			l.a.ms.closeAll()
		}
		l.a.mu.Lock()
		l.a.svc.Problem = "stopped"
		l.a.mu.Unlock()
	}()
	l.startResolve(ctx)
	l.resolveT = time.NewTimer(l.cfg.RegisterInterval)
	defer l.resolveT.Stop()
	_ = l.reconcile(ctx, false)
	for {
		select {
		case <-ctx.Done():
			return
		case evs, ok := <-l.events:
			if !ok {
				l.a.log.Warn("media/msr: interface events ended; keeping the last known state")
				l.events = nil
				continue
			}
			l.st = applyEvents(l.st, evs)
			l.debounce.Delay = l.cfg.Debounce
			l.debounce.Hint()
		case <-l.debounce.C():
			l.debounce.Fired()
			_ = l.reconcile(ctx, false)
		case <-l.rebind:
			l.rebind = nil
			_ = l.reconcile(ctx, false)
		case res := <-l.resolveC:
			l.resolveC = nil
			l.targets, l.resErrs = res.targets, res.errs
			for s, err := range res.errs {
				l.a.log.Warn("media/msr: server not resolved", "server", s, "err", err)
			}
			_ = l.reconcile(ctx, false)
		case <-l.resolveT.C:
			l.resolveT.Reset(l.cfg.RegisterInterval)
			l.startResolve(ctx)
		case req := <-l.a.reconf:
			req.reply <- l.reconfigure(ctx, req)
		}
	}
}

func (l *loop) reconfigure(ctx context.Context, req reconfReq) error {
	oldCfg, oldServers := l.cfg, l.servers
	oldTargets, oldErrs := l.targets, l.resErrs
	l.cfg, l.servers = req.cfg, req.servers
	serversChanged := !slices.Equal(oldServers, req.servers)
	if serversChanged {
		// Literal addresses apply at once; names keep their last answer
		// until the new resolution arrives.
		var keep []target
		for _, t := range l.targets {
			if slices.ContainsFunc(req.servers, func(s server) bool { return s.name == t.server }) {
				keep = append(keep, t)
			}
		}
		l.targets = keep
		l.startResolve(ctx)
	}
	if oldCfg.RegisterInterval != req.cfg.RegisterInterval {
		l.resolveT.Reset(req.cfg.RegisterInterval)
	}
	if err := l.reconcile(ctx, true); err != nil {
		l.cfg, l.servers = oldCfg, oldServers
		l.targets, l.resErrs = oldTargets, oldErrs
		if serversChanged {
			l.startResolve(ctx) // supersedes the new servers' resolution
		}
		l.resolveT.Reset(oldCfg.RegisterInterval)
		_ = l.reconcile(ctx, false)
		return fmt.Errorf("media/msr: reconfigure (previous configuration kept): %w", err)
	}
	return nil
}

// startResolve resolves the servers: IP literals at once, names in a
// goroutine whose answer arrives on resolveC (a newer one replaces it).
func (l *loop) startResolve(ctx context.Context) {
	lit, all := literalTargets(l.servers)
	if all {
		l.targets, l.resErrs, l.resolveC = lit, nil, nil
		return
	}
	ch := make(chan resolution, 1)
	l.resolveC = ch
	servers, prev, r := slices.Clone(l.servers), slices.Clone(l.targets), l.a.opt.resolver
	l.wg.Go(func() {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ch <- resolveServers(rctx, r, servers, prev)
	})
}

func (l *loop) sender() sender {
	if l.tr == nil {
		return nil
	}
	return l.tr
}

// reconcile makes the bindings, the SIP socket and the control listener
// match the configuration and the interfaces. It returns an error only
// when a socket cannot be bound, before any binding is touched: the SIP
// socket always, the control listener only when strict (a Reconfigure,
// which then rolls back); otherwise registration goes on without the
// control channel, which is retried and reported in Control().
func (l *loop) reconcile(ctx context.Context, strict bool) error {
	cfg := l.cfg
	svc, svcOK, ifs := announced(l.st, cfg)
	if ms := l.a.ms; ms != nil {
		if cfg.Enabled && svcOK {
			ms.setIfaces(ifs, cfg.ContactID)
		} else {
			ms.setIfaces(nil, cfg.ContactID)
		}
	}
	status := ServiceStatus{Enabled: cfg.Enabled, Name: cfg.Name, Interface: cfg.ServiceInterface}
	for _, s := range l.servers {
		ss := ServerStatus{Name: s.name}
		for _, t := range l.targets {
			if t.server == s.name {
				ss.Addrs = append(ss.Addrs, t.addr)
			}
		}
		if err := l.resErrs[s.name]; err != nil {
			ss.Error = err.Error()
		}
		status.Servers = append(status.Servers, ss)
	}
	published := false
	publish := func() {
		if published {
			return
		}
		published = true
		l.a.mu.Lock()
		l.a.svc = status
		l.a.mu.Unlock()
		select {
		case l.a.poke <- struct{}{}:
		default:
		}
	}
	defer publish()

	switch {
	case !cfg.Enabled:
		status.Problem = "disabled"
		l.dropAll(false)
		l.retireTransport()
		l.closeControl()
		return nil
	case !svcOK:
		// Nothing can be sent: forget the registrations without
		// unREGISTER (they lapse at the registrar).
		status.Problem = fmt.Sprintf("service interface %s is down or has no usable address", cfg.ServiceInterface)
		l.dropAll(true)
		l.retireTransport()
		l.closeControl()
		return nil
	}
	status.Address = svc.Addr

	// Sockets first: a failure leaves the bindings as they are.
	var oldTr *transport
	if l.tr == nil || l.tr.laddr.Addr() != svc.Addr || (cfg.LocalPort != 0 && int(l.tr.laddr.Port()) != cfg.LocalPort) {
		tr, err := newTransport(ctx, l.a.opt.sockets, svc.Addr, cfg.LocalPort, l.a.ms, l.a.log)
		if err != nil {
			l.a.log.Warn("media/msr: cannot bind the SIP socket, retrying", "err", err, "after", rebindRetry)
			status.Problem = err.Error()
			l.rebind = time.After(rebindRetry)
			return err
		}
		oldTr, l.tr = l.tr, tr
		l.a.log.Info("media/msr: SIP socket bound", "local", tr.laddr)
	}
	status.Local = l.tr.laddr
	ccPort := cfg.ControlPort
	if err := l.ensureControl(ctx, svc.Addr); err != nil {
		l.rebind = time.After(rebindRetry)
		if strict {
			if oldTr != nil {
				// Keep the old socket: nothing has moved to the new one yet.
				l.tr.close()
				l.tr = oldTr
			}
			return err
		}
		status.Problem = err.Error()
	}
	if l.ctl != nil {
		ccPort = int(l.ctl.addr.Port())
	}

	// Targets of the service address's family (a v4 socket cannot reach
	// a v6 registrar).
	var targets []target
	for _, t := range l.targets {
		if t.addr.Addr().Is4() == svc.Addr.Is4() {
			targets = append(targets, t)
		}
	}
	switch {
	case len(targets) > 0:
	case l.resolveC != nil:
		status.Problem = "resolving servers"
	default:
		status.Problem = "no server address of the service address's family"
	}

	want := map[bindingKey]regSpec{}
	for _, f := range ifs {
		status.Announced = append(status.Announced, f.Name)
		for _, t := range targets {
			sp := l.spec(cfg, svc, f, t, ccPort)
			want[bindingKey{iface: f.Name, aor: sp.aor.String(), target: t.addr}] = sp
		}
	}
	// Before the bindings send: what the registrar sees is never ahead of
	// the status (its socket and announced interfaces).
	publish()
	for k, b := range l.bindings {
		if _, ok := want[k]; !ok {
			b.remove(l.sender(), false)
			l.draining[k] = b.done
			delete(l.bindings, k)
		}
	}
	for k, sp := range want {
		if b, ok := l.bindings[k]; ok {
			b.push(sp)
			continue
		}
		var after <-chan struct{}
		if d, ok := l.draining[k]; ok {
			select {
			case <-d:
			default:
				after = d
			}
			delete(l.draining, k)
		}
		b := newBinding(k, after, l.loadNow, l.a.report(k), l.a.log)
		b.last = sp
		l.bindings[k] = b
		l.wg.Go(func() { b.run(l.bctx, sp) })
	}
	for k, d := range l.draining {
		select {
		case <-d:
			delete(l.draining, k)
		default:
		}
	}
	if oldTr != nil {
		// In-flight sends on the old socket were interrupted by the pushes
		// above; close it once they have returned.
		l.wg.Go(oldTr.close)
	}
	return nil
}

// retireTransport closes the SIP socket once the bindings being removed
// have sent their unREGISTERs through it.
func (l *loop) retireTransport() {
	tr := l.tr
	if tr == nil {
		return
	}
	l.tr = nil
	var wait []chan struct{}
	for _, d := range l.draining {
		wait = append(wait, d)
	}
	l.wg.Go(func() {
		for _, d := range wait {
			<-d
		}
		tr.close()
	})
}

// spec is what interface f registers at t.
func (l *loop) spec(cfg Config, svc, f iface, t target, ccPort int) regSpec {
	p := cfg.HeaderPrefix
	user := f.Name + ";" + cfg.ContactID
	hs := []header{
		{p + selection.HdrIfaceName, f.Name},
		{p + selection.HdrIfaceAddr, f.Addr.String()},
		{p + selection.HdrAccID, cfg.ContactID},
		{p + selection.HdrName, cfg.Name},
	}
	if f.Service {
		hs = append(hs,
			header{p + selection.HdrCCAddr, svc.Addr.String()},
			header{p + selection.HdrCCPort, strconv.Itoa(ccPort)})
	}
	if cfg.Zone != "" {
		hs = append(hs, header{p + selection.HdrZone, cfg.Zone})
	}
	if cfg.Site != "" {
		hs = append(hs, header{p + selection.HdrSite, cfg.Site})
	}
	return regSpec{
		snd:        l.tr,
		target:     t,
		iface:      f,
		requestURI: sip.Uri{Scheme: "sip", Host: cfg.Name},
		aor:        sip.Uri{Scheme: "sip", User: user, Host: cfg.Name},
		contact:    sip.Uri{Scheme: "sip", User: user, Host: svc.Addr.String(), Port: int(l.tr.laddr.Port())},
		display:    f.Name + "(" + f.Addr.String() + ")",
		headers:    hs,
		loadHeader: p + selection.HdrLoad,
		expires:    cfg.Expires,
		interval:   cfg.RegisterInterval,
		retry:      cfg.RetryInterval,
		timeout:    cfg.Timeout,
		auth:       sipgo.DigestAuth{Username: cfg.Username, Password: cfg.Password},
	}
}

// ensureControl keeps the control listener on addr:ControlPort, binding
// a new one (before closing the old) when either changed, and hands it
// the sources it may accept: the servers' current addresses (l.targets,
// every family: the last good answer while DNS fails) and ControlAllow.
// Every reconcile passes here, so a new resolution or configuration is
// published before the status that reports it.
func (l *loop) ensureControl(ctx context.Context, addr netip.Addr) error {
	port := l.cfg.ControlPort
	allow := newControlAllow(l.targets, l.cfg.ControlAllow)
	if l.ctl != nil && l.ctl.addr.Addr() == addr && (port == -1 || int(l.ctl.addr.Port()) == port) {
		l.ctl.setTimers(l.cfg.ControlKeepAlive, l.cfg.ControlSyncTimeout, l.cfg.ControlDialogRequired)
		l.ctl.setAllow(allow)
		return nil
	}
	bind := port
	if bind == -1 {
		bind = 0
	}
	ctl, err := listenControl(ctx, l.a.opt.sockets, netip.AddrPortFrom(addr, uint16(bind)), defaultControlParams(l.cfg.ControlKeepAlive, l.cfg.ControlSyncTimeout, l.cfg.ControlDialogRequired), allow, l.a.ms, l.a.log)
	if err != nil {
		if l.ctl != nil {
			l.ctl.setAllow(allow) // the old listener, kept meanwhile, follows the servers too
		}
		l.a.mu.Lock()
		repeated := l.a.ctlError == err.Error()
		l.a.ctlError = err.Error()
		l.a.mu.Unlock()
		if !repeated { // retried every rebindRetry: say it once
			l.a.log.Warn("media/msr: cannot open the control channel listener", "err", err)
		}
		return err
	}
	l.closeControl()
	l.ctl = ctl
	if l.a.ms != nil {
		l.a.ms.setControl(ctl)
	}
	l.a.mu.Lock()
	l.a.ctl, l.a.ctlError = ctl, ""
	l.a.mu.Unlock()
	l.a.log.Info("media/msr: control channel listening", "addr", ctl.addr)
	return nil
}

func (l *loop) closeControl() {
	if l.ctl == nil {
		return
	}
	if l.a.ms != nil {
		l.a.ms.setControl(nil)
	}
	l.ctl.close()
	st := l.ctl.status()
	l.a.mu.Lock()
	l.a.ctlSeen.Accepted += st.Accepted
	l.a.ctlSeen.Refused += st.Refused
	l.a.ctlSeen.Dropped += st.Dropped
	l.a.ctl = nil
	l.a.mu.Unlock()
	l.ctl = nil
}

func (l *loop) closeTransport() {
	if l.tr != nil {
		l.tr.close()
		l.tr = nil
	}
}

// dropAll removes every binding; silent skips the unREGISTERs.
func (l *loop) dropAll(silent bool) {
	for k, b := range l.bindings {
		b.remove(l.sender(), silent)
		l.draining[k] = b.done
		delete(l.bindings, k)
	}
}

// loadNow reads the load for one REGISTER and remembers it.
func (l *loop) loadNow() int {
	n := min(max(l.a.opt.load(), 0), 100)
	l.a.load.Store(int64(n))
	return n
}
