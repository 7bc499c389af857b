package appliance

import (
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
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/appliance/store"
	"github.com/outpost/outpost/gateway"
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
	opts    Options
	log     *slog.Logger
	st      *store.Store
	gw      *gateway.Server
	mgmt    *mgmt
	net     *netcfg.Watcher // the kernel's links, addresses and routes
	net0    netcfg.State    // the state at start, until the watcher has one
	netSrc  netcfg.Source
	mode    *mode.Driver // normal / survivable / standalone
	msr     *msrPart     // MSR registration of the interfaces, media resource table
	media   *mediaPart   // the RTP relay that anchors calls' media
	cdr     *cdrWriter
	started time.Time

	mu      sync.Mutex // serialises Apply/Rollback and guards doc/version
	doc     *config.Document
	version store.Version
}

// Run starts the appliance and blocks until ctx ends or a part fails.
func Run(ctx context.Context, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.DataDir == "" {
		return errors.New("appliance: data directory is required")
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return fmt.Errorf("appliance: data directory: %w", err)
	}
	st, err := store.Open(ctx, filepath.Join(opts.DataDir, DBFile))
	if err != nil {
		return fmt.Errorf("appliance: %w", err)
	}
	defer st.Close()
	a := &App{opts: opts, log: log, st: st, started: time.Now(),
		netSrc: netcfg.NetlinkSource(0),
		cdr:    newCDRWriter(st, log.With("part", "cdr"))}
	if err := a.loadInitial(ctx); err != nil {
		return err
	}
	a.mode = mode.NewDriver(modeConfig(a.doc), log.With("part", "mode"))
	if a.media, err = newMediaPart(a.doc, log.With("part", "media")); err != nil {
		return fmt.Errorf("appliance: %w", err)
	}
	a.net = netcfg.NewWatcher(a.netSrc, netcfg.Config{}, log.With("part", "netcfg"))
	a.net0 = a.firstSnapshot(ctx)
	gcfg, err := a.gatewayConfig(a.doc)
	if err != nil {
		return fmt.Errorf("appliance: %w", err)
	}
	a.gw, err = gateway.New(ctx, gcfg, bindingStore{st}, log.With("part", "gateway"))
	if err != nil {
		return fmt.Errorf("appliance: %w", err)
	}
	a.gw.OnHQTarget(func(ev gateway.HQTargetEvent) { a.mode.Send(hqTargetEvent(ev)) })
	a.gw.SetLocalChooser((&localChooser{a: a, rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x07057))}).choose)
	if a.msr, err = newMSRPart(a.doc, a.net, a.gw.Registrar(), log.With("part", "msr")); err != nil {
		return fmt.Errorf("appliance: %w", err)
	}

	sockPath := filepath.Join(opts.DataDir, SocketFile)
	ln, err := listenUnix(sockPath)
	if err != nil {
		return fmt.Errorf("appliance: admin socket: %w", err)
	}
	handler := api.Handler(a, log.With("part", "api"), a.metricsHandler())
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	a.mgmt = newMgmt(handler, log.With("part", "management"))
	if err := a.mgmt.Reconfigure(ctx, a.doc.Management); err != nil {
		ln.Close()
		return fmt.Errorf("appliance: %w", err)
	}
	defer a.mgmt.Stop()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	// A part that fails stops the appliance; its error is logged even when
	// the appliance was already stopping (e.g. a failed final flush).
	fail := func(err error) {
		log.Error("part failed", "err", err)
		cancel(err)
	}
	wg.Go(func() {
		if err := a.gw.Run(ctx); err != nil {
			fail(err)
		}
	})
	wg.Go(func() {
		if err := a.net.Run(ctx); err != nil {
			fail(fmt.Errorf("appliance: netcfg: %w", err))
		}
	})
	wg.Go(func() {
		if err := a.mode.Run(ctx); err != nil {
			fail(fmt.Errorf("appliance: mode: %w", err))
		}
	})
	wg.Go(func() { a.runMode(ctx) })
	wg.Go(func() {
		if err := a.media.run(ctx); err != nil {
			fail(fmt.Errorf("appliance: media: %w", err))
		}
	})
	wg.Go(func() {
		if err := a.msr.run(ctx); err != nil {
			fail(fmt.Errorf("appliance: msr: %w", err))
		}
	})
	wg.Go(func() {
		if err := a.cdr.Run(ctx); err != nil {
			fail(fmt.Errorf("appliance: cdr: %w", err))
		}
	})
	wg.Go(func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("appliance: admin api: %w", err))
		}
	})
	a.announce(sockPath)

	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	wg.Wait()
	os.Remove(sockPath)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("outpostd stopped")
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
	a.mu.Lock()
	doc, v := a.doc, a.version
	a.mu.Unlock()
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
