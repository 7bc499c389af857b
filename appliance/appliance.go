package appliance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/store"
	"github.com/outpost/outpost/gateway"
	"github.com/outpost/outpost/media/voicemail"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/netcfg"
)

// Options are outpostd's command-line settings.
type Options struct {
	DataDir    string // holds outpost.db and outpostd.sock
	ConfigFile string // optional document to apply at start
	// FactoryFile is the document to start on when the store has no
	// version yet (instead of the embedded default); once any version is
	// stored it is ignored, so a reboot never undoes HQ's pushes.
	FactoryFile string
	Version     string // build version, reported in status
	Logger      *slog.Logger
	Firmware    api.Firmware // A/B updater served at /api/v1/firmware; nil without an A/B layout
}

// Names of the files in the data directory.
const (
	DBFile     = "outpost.db"
	SocketFile = "outpostd.sock"
)

// App is a running appliance.
type App struct {
	opts Options
	host string // os.Hostname at start (the default MSR name)
	log  *slog.Logger
	st   *store.Store
	gw   *gateway.Server
	// services are the users' do-not-disturb and forwards as phones set
	// them (services.go)
	services *userServices
	vm       *voicemail.Service // the box's own voicemail (voicemail.go)
	// boxTLS is the box's own SIP TLS certificate (boxcert.go), presented
	// when the document has no sip.tls.
	boxTLS   gateway.TLSCert
	mgmt     *mgmt
	status   *statusPart     // the local read-only status page
	net      *netcfg.Watcher // the kernel's links, addresses and routes
	net0     netcfg.State    // the state at start, until the watcher has one
	netSrc   netcfg.Source
	mode     *mode.Driver // normal / survivable / standalone
	msr      *msrPart     // MSR registration of the interfaces, media resource table
	media    *mediaPart   // the RTP relay that anchors calls' media
	cdr      *cdrWriter
	admin    net.Listener // the admin socket
	adminAPI http.Handler // what it serves: the API and profiling
	started  time.Time

	// parts are applied in this order (see parts.go).
	parts []part
	// cur is the running document and version. Readers load it without a
	// lock; only an apply (holding applyMu) stores a new one.
	cur atomic.Pointer[running]
	// applyMu serialises Apply, Rollback and the rebinding of listeners
	// that follow interface addresses. Nothing a call, a probe or a netlink
	// event runs waits for it.
	applyMu sync.Mutex
	// stopping refuses applies once Run has begun to stop the parts
	// (guarded by applyMu).
	stopping bool
	// traces ends the API's trace streams when the APIs stop (trace.go).
	traces tracesEnd
}

// running is a document the box runs and its stored version; never
// changed once published.
type running struct {
	doc     *config.Document
	version store.Version
	parts   *partConfigs // doc translated; nil only while New builds the parts
}

func (a *App) running() *running { return a.cur.Load() }

// Run starts the appliance and blocks until ctx ends or a part fails.
func Run(ctx context.Context, opts Options) error {
	a, err := New(ctx, opts)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// New opens the store, chooses the document to run, builds every part on
// it and binds their sockets; nothing is served until Run. If New fails,
// what it opened is closed.
func New(ctx context.Context, opts Options) (_ *App, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.DataDir == "" {
		return nil, errors.New("appliance: data directory is required")
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("appliance: data directory: %w", err)
	}
	st, err := store.Open(ctx, filepath.Join(opts.DataDir, DBFile))
	if err != nil {
		return nil, fmt.Errorf("appliance: %w", err)
	}
	a := &App{opts: opts, log: log, st: st, started: time.Now(),
		netSrc: netcfg.NetlinkSource(0),
		cdr:    newCDRWriter(st, log.With("part", "cdr"))}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if err := a.loadInitial(ctx); err != nil {
		return nil, err
	}
	doc := a.running().doc
	host, _ := os.Hostname()
	a.host = host
	if a.boxTLS, err = boxCertificate(opts.DataDir, cmp.Or(host, "outpost")); err != nil {
		return nil, fmt.Errorf("appliance: %w", err)
	}
	a.net = netcfg.NewWatcher(a.netSrc, netcfg.Config{}, log.With("part", "netcfg"))
	a.net0 = a.firstSnapshot(ctx)
	first, err := translate(doc, environment{Build: opts.Version, Mode: mode.Normal, Net: a.net0, Hostname: host})
	if err != nil {
		return nil, fmt.Errorf("appliance: %w", err)
	}
	a.mode = mode.NewDriver(first.Mode, log.With("part", "mode"))
	if a.media, err = newMediaPart(first, a.boundPorts, log.With("part", "media")); err != nil {
		return nil, partFailed("media", err)
	}
	a.media.ifaceOf = a.ifaceOf
	if first, err = translate(doc, a.env()); err != nil { // the machine's first mode
		return nil, fmt.Errorf("appliance: %w", err)
	}
	a.cur.Store(&running{doc: doc, version: a.running().version, parts: first})
	if a.services, err = loadUserServices(ctx, st); err != nil {
		return nil, partFailed("gateway", err)
	}
	if a.vm, err = newVoicemail(opts.DataDir, st, a.mailboxChanged, log.With("part", "voicemail")); err != nil {
		return nil, partFailed("voicemail", err)
	}
	a.vm.SetLimits(first.Voicemail)
	if a.gw, err = gateway.New(ctx, a.wire(first), bindingStore{st}, log.With("part", "gateway")); err != nil {
		return nil, partFailed("gateway", err)
	}
	a.gw.OnHQTarget(func(ev gateway.HQTargetEvent) { a.mode.Send(hqTargetEvent(ev)) })
	a.gw.SetLocalChooser((&localChooser{a: a, rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x07057))}).choose)
	inactive, err := a.st.InactiveMSRs(ctx)
	if err != nil {
		return nil, partFailed("msr", err)
	}
	if a.msr, err = newMSRPart(first, inactive, a.net, a.netState, a.gw.Registrar(), msrMedia{a.media.r}, func() uint64 { return a.media.r.Stats().TotalPackets() }, log.With("part", "msr")); err != nil {
		return nil, partFailed("msr", err)
	}
	if a.admin, err = listenUnix(filepath.Join(opts.DataDir, SocketFile)); err != nil {
		return nil, fmt.Errorf("appliance: admin socket: %w", err)
	}
	metrics := a.metricsHandler()
	a.adminAPI = api.AdminHandler(a, log.With("part", "api"), metrics)
	a.mgmt = newMgmt(api.Handler(a, log.With("part", "api"), metrics), log.With("part", "management"))
	a.status = newStatusPart(a, log.With("part", "status"))
	a.parts = []part{gatewayPart{a}, a.media, voicemailPart{a.vm}, a.msr, a.mgmt, a.status, modePart{a}}
	c, err := a.mgmt.prepare(ctx, first)
	if err != nil {
		return nil, partFailed("management", err)
	}
	c.Commit()
	// Last, so that nothing after it can fail New; a status page that
	// cannot bind is logged and the box runs without it.
	a.status.start(ctx, first)
	return a, nil
}

// close releases what New opened, for a New that failed.
func (a *App) close() {
	if a.admin != nil {
		a.admin.Close()
		os.Remove(a.admin.Addr().String())
	}
	if a.gw != nil {
		a.gw.Close()
	}
	a.st.Close()
}

// service is one long-running goroutine of the appliance.
type service struct {
	name string
	run  func(ctx context.Context) error
}

// Run serves until ctx ends or a part fails. When ctx ends it first
// drains: new calls are refused while those in progress get up to
// sip.drain_s to finish (the API still answers, status says so). Then it
// stops the parts in order, each after the one before has returned:
//
//  1. the admin socket, the management API and the status page: no
//     pushes while stopping;
//  2. the gateway: SIP stops, calls end, their CDRs are queued (the drain
//     of calls in progress, when it comes, belongs here);
//  3. msr: the interfaces' MSR UAs unREGISTER;
//  4. the media relay: every session closed;
//  5. the netlink watcher, the mode machine and its follower;
//  6. the CDR writer, last, so every ended call's record is written;
//
// and closes the store.
func (a *App) Run(ctx context.Context) error {
	defer a.st.Close()
	defer a.mgmt.Stop()
	defer a.status.Stop()
	sockPath := filepath.Join(a.opts.DataDir, SocketFile)
	hs := &http.Server{Handler: a.adminAPI, ReadHeaderTimeout: 10 * time.Second}
	rebind := make(chan struct{}, 1)
	services := []service{ // in stop order
		{"admin api", func(ctx context.Context) error {
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(a.admin) }()
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			a.traces.close()
			_ = hs.Shutdown(sctx)
			a.mgmt.Stop()
			a.status.Stop()
			<-errc
			return nil
		}},
		{"gateway", a.gw.Run},
		{"msr", a.msr.run},
		{"media", a.media.run},
		{"follow addresses", func(ctx context.Context) error { a.followAddresses(ctx, rebind); return nil }},
		{"mode follower", func(ctx context.Context) error { a.runMode(ctx, rebind); return nil }},
		{"mode", a.mode.Run},
		{"netcfg", a.net.Run},
		{"cdr", a.cdr.Run},
	}
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	stops := make([]func(), len(services))
	for i, s := range services {
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := s.run(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) && sctx.Err() == nil {
				a.log.Error("part failed", "part", s.name, "err", err)
				fail(fmt.Errorf("appliance: %s: %w", s.name, err))
			} else if err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("part failed while stopping", "part", s.name, "err", err)
			}
		}()
		stops[i] = func() { cancel(); <-done }
	}
	a.announce(sockPath)

	<-ctx.Done()
	if context.Cause(ctx) == nil || errors.Is(context.Cause(ctx), context.Canceled) {
		a.drainForStop() // a stop, not a failed part: let calls in progress finish
	}
	a.applyMu.Lock() // an apply in progress ends first; later ones are refused
	a.stopping = true
	a.applyMu.Unlock()
	for _, stop := range stops {
		stop()
	}
	os.Remove(sockPath)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	a.log.Info("outpostd stopped")
	return nil
}

// listenUnix binds the admin socket readable by its owner only. A stale
// socket from a crashed run is removed; a live one means another outpostd
// is using this data directory, which must not be.
func listenUnix(path string) (net.Listener, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s is in use: another outpostd runs on this data directory", path)
	}
	os.Remove(path)
	old := umask(0o177)
	ln, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// announce logs what a person at the console needs: where SIP listens and,
// on the embedded default, how to register a softphone.
func (a *App) announce(sock string) {
	cur := a.running()
	doc, v := cur.doc, cur.version
	listeners := a.gw.Listeners()
	a.log.Info("outpostd running", "version", a.opts.Version, "config_version", v.Version,
		"config_source", v.Source, "mode", a.mode.Mode(), "sip", listeners, "admin_socket", sock)
	if v.Source != sourceDefault {
		return
	}
	realm := doc.SIP.EffectiveRealm(doc.Site)
	a.log.Info("running the EMBEDDED DEFAULT config (standalone, loopback only, demo users): " +
		"register a softphone to " + firstUDP(listeners) + " as user 1001, password demo1001, realm/domain " + realm +
		" (also 1002/demo1002, 1003/demo1003); apply your own document with: outpostctl --socket " + sock + " config apply FILE")
}

func firstUDP(ls []string) string {
	for _, l := range ls {
		if len(l) > 4 && l[:4] == "udp:" {
			return l[4:]
		}
	}
	if len(ls) > 0 {
		return ls[0]
	}
	return "(no listener)"
}
