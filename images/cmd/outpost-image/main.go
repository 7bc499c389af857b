// Command outpost-image builds Outpost firmware offline and tests it in
// qemu: a thin main over package images (see its doc and images/README.md).
//
//	outpost-image image   -arch amd64|arm64   disk image → images/out/outpost-ARCH.img
//	outpost-image bundle  -arch amd64|arm64   signed update bundle of that image's slot
//	outpost-image test    -arch amd64|arm64   boot tests in qemu (run inside unshare -n)
//	outpost-image factory -hq-ca F -box-cert F -box-key F -out F   (Buildroot post-build.sh)
//	outpost-image grubenv -out F                                   (Buildroot post-image.sh)
//	outpost-image sign    -rootfs F -key F -arch A -version V -out-file F  (Buildroot post-image.sh)
//	outpost-image keygen  -key F                                   (bundle key pair, kept if present)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/outpost/outpost/images"
	"github.com/outpost/outpost/images/layout"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: outpost-image image|bundle|test|factory|grubenv|sign|keygen [flags]")
		os.Exit(2)
	}
	verb := os.Args[1]
	fs := flag.NewFlagSet("outpost-image "+verb, flag.ExitOnError)
	arch := fs.String("arch", "amd64", "amd64 or arm64")
	repo := fs.String("repo", ".", "repository root")
	out := fs.String("out", "images/out", "output directory")
	keys := fs.String("keys", "images/keys", "bundle key and lab PKI (made on first use)")
	version := fs.String("version", "dev", "firmware version")
	epoch := fs.Int64("epoch", envEpoch(), "SOURCE_DATE_EPOCH (seconds since 1970; default: the environment's)")
	hqCA := fs.String("hq-ca", "", "CA of HQ's client certificates (default: the lab CA)")
	boxCert := fs.String("box-cert", "", "management server certificate (default: issued by the lab CA)")
	boxKey := fs.String("box-key", "", "its key")
	boxHosts := fs.String("box-hosts", "", "SANs of the lab box certificate (default 127.0.0.1,::1,outpost,outpost.local)")
	file := fs.String("out-file", "", "factory, grubenv: file to write")
	key := fs.String("key", "", "keygen, sign: private key file")
	rootfs := fs.String("rootfs", "", "sign: slot image (rootfs.squashfs)")
	accel := fs.String("accel", "auto", "test: kvm, tcg or auto (kvm when /dev/kvm opens)")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up after this long")
	verbose := fs.Bool("v", false, "log every command")
	fs.Parse(os.Args[2:])
	switch verb {
	case "image", "bundle", "test", "sign": // every timestamp they write is the epoch
		if *epoch <= 0 {
			fmt.Fprintf(os.Stderr, "outpost-image %s: no build epoch: pass -epoch SECONDS or set SOURCE_DATE_EPOCH (make passes the last commit's time)\n", verb)
			os.Exit(2)
		}
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	absRepo, _ := filepath.Abs(*repo)
	p := &images.Project{Repo: absRepo, Out: abs(*out), Keys: abs(*keys), Version: *version, Epoch: *epoch,
		HQCA: abs(*hqCA), BoxCert: abs(*boxCert), BoxKey: abs(*boxKey), BoxHosts: *boxHosts, Log: log}
	var err error
	switch verb {
	case "image":
		var res images.Result
		if res, err = p.Image(ctx, *arch); err == nil {
			fmt.Printf("%s (kernel %s, slot image %s, built in %s)\n", res.Image, res.Kernel, sizeOf(res.Rootfs), res.Elapsed.Round(time.Millisecond))
		}
	case "bundle":
		var b string
		if b, err = p.Bundle(*arch); err == nil {
			fmt.Printf("%s (%s)\n", b, sizeOf(b))
		}
	case "test":
		var rep images.BootReport
		if rep, err = images.BootTest(ctx, images.BootTestOptions{Project: p, Arch: *arch, Accel: *accel}); err == nil {
			js, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Printf("%s\n", js)
		}
	case "factory":
		var doc []byte
		if doc, err = images.MakeFactory(images.FactoryOptions{HQCA: *hqCA, BoxCert: *boxCert, BoxKey: *boxKey}); err == nil {
			err = os.WriteFile(*file, doc, 0o600)
		}
	case "grubenv":
		var b []byte
		if b, err = layout.FactoryEnv().Encode(); err == nil {
			err = os.WriteFile(*file, b, 0o644)
		}
	case "sign":
		_, err = images.MakeBundle(images.BundleOptions{Rootfs: *rootfs, Key: *key, Arch: *arch, Version: *version, Epoch: *epoch, Out: *file})
	case "keygen":
		_, err = images.EnsureKey(*key)
	default:
		err = fmt.Errorf("unknown verb %q", verb)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "outpost-image %s: %v\n", verb, err)
		os.Exit(1)
	}
}

func abs(p string) string {
	if p == "" {
		return ""
	}
	a, _ := filepath.Abs(p)
	return a
}

// envEpoch is SOURCE_DATE_EPOCH from the environment, 0 when unset (the
// verbs that need one then fail saying so); a value that is not a positive
// whole number of seconds is an error, never silently 0.
func envEpoch() int64 {
	v, ok := os.LookupEnv("SOURCE_DATE_EPOCH")
	if !ok || v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "outpost-image: SOURCE_DATE_EPOCH=%q is not a positive number of seconds\n", v)
		os.Exit(2)
	}
	return n
}

func sizeOf(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f MiB", float64(fi.Size())/(1<<20))
}
