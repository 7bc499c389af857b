// Command outpostd is the Outpost branch-survivability daemon: flags, the
// slog handler (and its syslog sink) and signals; everything else is
// appliance.Run.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/appliance"
	"github.com/outpost/outpost/gateway/siplog"
)

// version is stamped by the Makefile: -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(run()) }

// run is main with deferred clean-ups: the syslog sink flushes before the
// process exits, whatever the exit status.
func run() int {
	data := flag.String("data", "/var/lib/outpost", "data directory (outpost.db, admin socket, spools)")
	cfgFile := flag.String("config", "", "config document to apply at start (stored as a new version if it differs)")
	factory := flag.String("factory", "", "document to start on when the data directory holds no configuration yet (a box's first boot); ignored afterwards, so HQ's pushes survive reboots")
	logFormat := flag.String("log-format", "text", "text or json")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	showVersion := flag.Bool("version", false, "print the version and exit")
	fwFlags := firmwareFlags() // firmware.go: --boot-env, --bundle-key, --ready-file
	sysFlags := syslogFlags()  // syslog.go: --syslog, --syslog-ca, --syslog-facility
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "outpostd: --log-level: %v\n", err)
		return 2
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch *logFormat {
	case "text":
		h = slog.NewTextHandler(os.Stderr, hopts)
	case "json":
		h = slog.NewJSONHandler(os.Stderr, hopts)
	default:
		fmt.Fprintf(os.Stderr, "outpostd: --log-format must be text or json\n")
		return 2
	}
	h, stopSyslog, err := sysFlags.start(h, level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "outpostd: %v\n", err)
		return 2
	}
	defer stopSyslog() // after the last record: flushes for at most 2 s
	log := slog.New(h)
	slog.SetDefault(log)
	// sipgo logs some per-packet events to its package logger, not to the
	// loggers each part gives it (a request or response nothing handles,
	// in a user agent that sets no handler for it): through a limiter too.
	sip.SetDefaultLogger(slog.New(siplog.New(h, siplog.Sipgo, siplog.Options{})).With("part", "sipgo"))
	// Half the collector's work for a heap that stays small on the box (the
	// SIP transactions kept for retransmissions dominate it under load);
	// measured in bench/RESULTS.md. GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcQuietPercent) // gcpace.go raises it while busy
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if l := defaultMemLimit(); l > 0 {
			debug.SetMemoryLimit(l)
		}
	}
	cpuLimit := cgroupCPULimit()
	log.Debug("scheduler", "gomaxprocs", fitGOMAXPROCS(cpuLimit), "cgroup_cpu_limit", cpuLimit)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The first signal drains and stops cleanly; a second one, while the
	// drain waits for calls, takes the default action: stop at once.
	go func() { <-ctx.Done(); stop() }()
	opts := appliance.Options{DataDir: *data, ConfigFile: *cfgFile, FactoryFile: *factory, Version: version, Logger: log}
	stopFirmware := fwFlags.start(ctx, &opts, log)
	trimCtx, stopTrim := context.WithCancel(ctx)
	var trim sync.WaitGroup
	trim.Go(func() { trimMemory(trimCtx) })
	if pacesGC() {
		trim.Go(func() { paceGC(trimCtx) })
	}
	err = appliance.Run(ctx, opts)
	stopTrim()
	trim.Wait()
	stopFirmware()
	if err != nil {
		log.Error("outpostd failed", "err", err)
		return 1
	}
	return 0
}
