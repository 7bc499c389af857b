package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"

	"github.com/outpost/outpost/appliance/logsink"
)

// sysFlags send the log to a syslog collector as well as stderr. They are
// flags, not part of HQ's document: logging starts before the document
// is loaded, and its first records (a refused document) matter most.
type sysFlags struct {
	target, caFile, facility *string
}

func syslogFlags() sysFlags {
	return sysFlags{
		target:   flag.String("syslog", "", "also send the log to a syslog collector (RFC 5424): udp://HOST[:514], tcp://HOST[:514] (octet counting) or tls://HOST[:6514]"),
		caFile:   flag.String("syslog-ca", "", "CA that signed the collector's certificate for tls:// (default: the system's roots)"),
		facility: flag.String("syslog-facility", "local0", "syslog facility: daemon, local0 … local7"),
	}
}

// start wraps the console handler h with the syslog sink, when --syslog
// is set, and starts the sink's goroutine; stop ends it after flushing
// for at most two seconds.
func (f sysFlags) start(h slog.Handler, level slog.Level) (_ slog.Handler, stop func(), err error) {
	if *f.target == "" {
		if *f.caFile != "" {
			return nil, nil, fmt.Errorf("--syslog-ca without --syslog")
		}
		return h, func() {}, nil
	}
	fac, ok := logsink.ParseFacility(*f.facility)
	if !ok {
		return nil, nil, fmt.Errorf("--syslog-facility %q: want daemon, local0 … local7 or another RFC 5424 facility name", *f.facility)
	}
	network, addr, err := logsink.ParseTarget(*f.target)
	if err != nil {
		return nil, nil, fmt.Errorf("--syslog: %w", err)
	}
	cfg := logsink.Config{Network: network, Address: addr, Header: logsink.Header{
		Facility: fac, AppName: "outpostd", ProcID: strconv.Itoa(os.Getpid())}}
	cfg.Header.Hostname, _ = os.Hostname()
	if network == "tls" {
		if cfg.TLS, err = logsink.TLSConfig(*f.caFile, addr); err != nil {
			return nil, nil, fmt.Errorf("--syslog-ca: %w", err)
		}
	} else if *f.caFile != "" {
		return nil, nil, fmt.Errorf("--syslog-ca is for tls:// targets")
	}
	sink, err := logsink.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--syslog: %w", err)
	}
	// The sink outlives appliance.Run (the stop order is logged), so it
	// has its own context, not the signal one.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sink.Run(ctx) })
	return logsink.NewHandler(h, sink, level), func() { cancel(); wg.Wait() }, nil
}
