package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/outpost/outpost/appliance"
	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/firmware"
)

// fwFlags are the A/B firmware settings the image's init passes; on a
// development host all are empty and nothing here runs.
type fwFlags struct {
	bootEnv, bundleKey, readyFile *string
}

func firmwareFlags() fwFlags {
	return fwFlags{
		bootEnv:   flag.String("boot-env", "", "GRUB environment block of the A/B layout (enables firmware updates)"),
		bundleKey: flag.String("bundle-key", "/etc/outpost/bundle.pub", "ed25519 public key that update bundles must verify with"),
		readyFile: flag.String("ready-file", "", "file written once outpostd is healthy (SIP answering, config loaded)"),
	}
}

// start sets up the updater (opts.Firmware) and the health watch that
// commits a trial boot; the returned function stops the watch and waits
// for it.
func (f fwFlags) start(ctx context.Context, opts *appliance.Options, log *slog.Logger) (stop func()) {
	var upd *firmware.Updater
	if *f.bootEnv != "" {
		sock := filepath.Join(opts.DataDir, appliance.SocketFile)
		u, err := firmware.New(firmware.Config{BootEnv: *f.bootEnv, BundleKey: *f.bundleKey, SpoolDir: opts.DataDir,
			Version: opts.Version, Log: log.With("part", "firmware"),
			Reboot: func() error { return drainThenReboot(sock, log) }})
		if err != nil {
			// Not fatal: the box still serves calls; a trial boot is then
			// not committed and the next boot returns to the committed slot.
			log.Error("firmware updates are off", "err", err)
		} else {
			upd, opts.Firmware = u, u
		}
	}
	if upd == nil && *f.readyFile == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := firmware.Ready(ctx, firmware.ReadyOptions{Socket: filepath.Join(opts.DataDir, appliance.SocketFile),
			Updater: upd, ReadyFile: *f.readyFile, Log: log.With("part", "firmware")})
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Error("health check", "err", err)
		}
	})
	return func() {
		cancel()
		wg.Wait()
		if upd != nil {
			upd.Close()
		}
	}
}

// drainThenReboot lets the calls in progress finish (new ones refused, up
// to sip.drain_s) before asking init to reboot: BusyBox init kills what is
// left a moment after its SIGTERM, too soon for a drain of its own.
func drainThenReboot(sock string, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if st, err := api.NewUnixClient(sock).Drain(ctx, true, true); err != nil {
		log.Warn("drain before reboot failed; rebooting anyway", "err", err)
	} else if st.Calls > 0 {
		log.Warn("drain time is up: rebooting with calls in progress", "calls", st.Calls)
	}
	return syscall.Kill(1, syscall.SIGTERM)
}
