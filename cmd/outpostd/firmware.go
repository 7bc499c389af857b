package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/outpost/outpost/appliance"
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
		u, err := firmware.New(firmware.Config{BootEnv: *f.bootEnv, BundleKey: *f.bundleKey, SpoolDir: opts.DataDir,
			Version: opts.Version, Log: log.With("part", "firmware")})
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
