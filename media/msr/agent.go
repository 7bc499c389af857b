package msr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/netcfg"
)

// rebindRetry is the pause before binding the service socket or the
// taken): short, because nothing can be registered meanwhile.
const rebindRetry = 5 * time.Second

// ErrRunning: Run was called twice.
var ErrRunning = errors.New("media/msr: agent already running")

// Option adjusts an Agent for tests or for the appliance's shared pools.
type Option func(*options)

type options struct {
	resolver Resolver
	sockets  Sockets
	load     LoadFunc
	media    Media
}

// WithResolver replaces net.DefaultResolver for server names.
func WithResolver(r Resolver) Option { return func(o *options) { o.resolver = r } }

// WithSockets replaces &net.ListenConfig{} for the SIP socket and the
// control listener.
func WithSockets(s Sockets) Option { return func(o *options) { o.sockets = s } }

// WithLoad replaces the /proc/stat CPU load announced in {prefix}Load (the
// appliance passes NewLoad: CPU and relay packet rate).
func WithLoad(f LoadFunc) Option { return func(o *options) { o.load = f } }

// Agent announces the box's interfaces to the softswitch as MSR UAs and
// serves the control channel. See the package documentation.
type Agent struct {
	log    *slog.Logger
	events <-chan []netcfg.Event
	opt    options
	reconf chan reconfReq
	load   atomic.Int64  // last announced load
	poke   chan struct{} // one slot: a registration's status changed (tests await it)

	mu       sync.Mutex
	cfg      Config // defaults applied
	servers  []server
	initial  netcfg.State
	running  bool
	done     chan struct{} // closed when Run returns
	uas      map[bindingKey]UAStatus
	svc      ServiceStatus
	ctl      *controlServer
	ctlError string
	ctlSeen  ControlStatus // counters of listeners already closed
	ms       *mediaServer  // media connections (nil without WithMedia)
}

type reconfReq struct {
	cfg     Config
	servers []server
	reply   chan error
}

// New returns an Agent for cfg (validated; zero fields are defaults) that
// follows the network through events: batches of netcfg events as a
// netcfg.Watcher subscription delivers them, starting from initial (pass
// netcfg.State{} when the subscription replays the whole state, as a
// fresh Watcher subscription does). A nil log discards.
func New(cfg Config, events <-chan []netcfg.Event, initial netcfg.State, log *slog.Logger, opts ...Option) (*Agent, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := cfg.withDefaults()
	servers, err := c.validate()
	if err != nil {
		return nil, err
	}
	a := &Agent{
		log:     log,
		events:  events,
		reconf:  make(chan reconfReq),
		poke:    make(chan struct{}, 1),
		cfg:     c,
		servers: servers,
		initial: initial.Clone(),
		done:    make(chan struct{}),
		uas:     map[bindingKey]UAStatus{},
	}
	a.opt = options{resolver: defaultResolver, sockets: &net.ListenConfig{}}
	for _, o := range opts {
		o(&a.opt)
	}
	if a.opt.media != nil {
		a.ms = newMediaServer(a.opt.media, log)
	}
	if a.opt.load == nil {
		a.opt.load = newCPULoad(nil).Load
	}
	return a, nil
}

// Reconfigure validates cfg and applies it: while Run runs, at once (new
// bindings registered, dropped ones unregistered, changed ones
// re-registered, sockets rebound only if their address changed); if a
// socket of the new configuration cannot be bound, the previous
// configuration is kept and the error returned. Before Run, or after it,
// cfg is stored for the next Run.
func (a *Agent) Reconfigure(ctx context.Context, cfg Config) error {
	c := cfg.withDefaults()
	servers, err := c.validate()
	if err != nil {
		return err
	}
	a.mu.Lock()
	running, done := a.running, a.done
	if !running {
		a.cfg, a.servers = c, servers
		a.mu.Unlock()
		return nil
	}
	a.mu.Unlock()
	req := reconfReq{cfg: c, servers: servers, reply: make(chan error, 1)}
	select {
	case a.reconf <- req:
	case <-done:
		a.mu.Lock()
		a.cfg, a.servers = c, servers
		a.mu.Unlock()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("media/msr: reconfigure: %w", ctx.Err())
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("media/msr: reconfigure: %w", ctx.Err())
	}
}

// Run registers and follows the network until ctx ends, then
// unREGISTERs every UA (each bounded by a few seconds), closes its
// sockets and returns nil once every goroutine it started has exited.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return ErrRunning
	}
	select {
	case <-a.done:
		a.done = make(chan struct{}) // a second Run after the first ended
	default:
	}
	a.running = true
	l := &loop{
		a:        a,
		cfg:      a.cfg,
		servers:  a.servers,
		st:       a.initial,
		events:   a.events,
		bindings: map[bindingKey]*binding{},
		draining: map[bindingKey]chan struct{}{},
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.running = false
		a.initial = l.st
		a.cfg, a.servers = l.cfg, l.servers
		close(a.done)
		a.mu.Unlock()
	}()
	l.run(ctx)
	return nil
}
