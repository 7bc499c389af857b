package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Project builds images and bundles of this repository: the steps that
// `make image` and `make bundle` run and that the image tests reuse.
type Project struct {
	Repo    string // repository root
	Out     string // images/out
	Keys    string // images/keys: bundle signing key, lab PKI (gitignored)
	Version string
	Epoch   int64 // SOURCE_DATE_EPOCH
	// HQCA is the CA trusted for the management API's client certificates
	// (the HQ_CA make variable); "" = the lab CA in Keys/lab.
	HQCA string
	// BoxCert/BoxKey are the management API's server certificate and key;
	// "" = issued once by the lab CA for BoxHosts.
	BoxCert, BoxKey string
	BoxHosts        string // SANs of the lab box certificate, comma-separated
	Log             *slog.Logger
}

func (p *Project) defaults() {
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	if p.BoxHosts == "" {
		p.BoxHosts = "127.0.0.1,::1,outpost,outpost.local"
	}
}

func (p *Project) runner() runner {
	return runner{log: p.Log, env: []string{"SOURCE_DATE_EPOCH=" + strconv.FormatInt(p.Epoch, 10)}}
}

// LabDir is the lab PKI (CA, box and HQ client certificates).
func (p *Project) LabDir() string { return filepath.Join(p.Keys, "lab") }

// BundleKey is the signing key of update bundles.
func (p *Project) BundleKey() string { return filepath.Join(p.Keys, "bundle.key") }

// ArchDir is the build directory of one architecture.
func (p *Project) ArchDir(arch string) string { return filepath.Join(p.Out, arch) }

// ImagePath is where Image leaves the disk image.
func (p *Project) ImagePath(arch string) string {
	return filepath.Join(p.Out, "outpost-"+arch+".img")
}

// BundlePath is where Bundle leaves the bundle.
func (p *Project) BundlePath(arch string) string {
	return filepath.Join(p.Out, "outpost-"+p.Version+"-"+arch+".bundle")
}

// GoBuild builds outpostd and outpostctl for linux/arch into dir: static
// (CGO_ENABLED=0), stripped, reproducible (-trimpath, no build ID or VCS
// stamp; the version comes from the caller).
func (p *Project) GoBuild(ctx context.Context, arch, version, dir string) (outpostd, outpostctl string, err error) {
	r := p.runner()
	r.env = append(r.env, "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	abs, _ := filepath.Abs(dir)
	if _, err := r.run(ctx, p.Repo, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+version, "-o", abs+"/", "./cmd/outpostd", "./cmd/outpostctl"); err != nil {
		return "", "", fmt.Errorf("images: %w", err)
	}
	return filepath.Join(abs, "outpostd"), filepath.Join(abs, "outpostctl"), nil
}

// HostCtl builds outpostctl for this machine (for pki and the boot tests).
func (p *Project) HostCtl(ctx context.Context) (string, error) {
	dir := filepath.Join(p.Out, "host")
	r := p.runner()
	r.env = append(r.env, "CGO_ENABLED=0")
	abs, _ := filepath.Abs(dir)
	if _, err := r.run(ctx, p.Repo, "go", "build", "-trimpath", "-o", abs+"/", "./cmd/outpostctl"); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	return filepath.Join(abs, "outpostctl"), nil
}

// Inputs prepares what every build of arch needs: the lab PKI and the
// bundle key (made on first use), the factory document, the binaries.
type Inputs struct {
	Outpostd, Outpostctl string
	HostCtl              string
	Factory              string
	BundlePub            string
}

// Prepare makes the Inputs of arch in dir, with the binaries built for
// version.
func (p *Project) Prepare(ctx context.Context, arch, version, dir string) (Inputs, error) {
	p.defaults()
	var in Inputs
	var err error
	if in.HostCtl, err = p.HostCtl(ctx); err != nil {
		return in, err
	}
	if err := EnsureLab(ctx, p.runner(), in.HostCtl, p.LabDir(), p.BoxHosts); err != nil {
		return in, err
	}
	if in.BundlePub, err = EnsureKey(p.BundleKey()); err != nil {
		return in, err
	}
	fo := FactoryOptions{HQCA: p.HQCA, BoxCert: p.BoxCert, BoxKey: p.BoxKey}
	// Defaults are the lab PKI's, and said so; half a key pair is an error,
	// not a reason to fall back to the lab's.
	if fo.HQCA == "" {
		fo.HQCA = filepath.Join(p.LabDir(), LabCA)
		p.Log.Info("no HQ_CA given: the image trusts the lab CA", "hq_ca", fo.HQCA)
	}
	switch {
	case fo.BoxCert == "" && fo.BoxKey != "":
		return in, errors.New("images: BOX_KEY (-box-key) given without BOX_CERT (-box-cert)")
	case fo.BoxCert != "" && fo.BoxKey == "":
		return in, errors.New("images: BOX_CERT (-box-cert) given without BOX_KEY (-box-key)")
	case fo.BoxCert == "":
		fo.BoxCert, fo.BoxKey = filepath.Join(p.LabDir(), LabBox+".pem"), filepath.Join(p.LabDir(), LabBox+"-key.pem")
		p.Log.Info("no BOX_CERT/BOX_KEY given: the management API uses the lab CA's box certificate", "box_cert", fo.BoxCert, "box_key", fo.BoxKey)
	}
	doc, err := MakeFactory(fo)
	if err != nil {
		return in, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return in, err
	}
	in.Factory = filepath.Join(dir, FactoryDoc)
	if err := os.WriteFile(in.Factory, doc, 0o600); err != nil {
		return in, err
	}
	in.Outpostd, in.Outpostctl, err = p.GoBuild(ctx, arch, version, filepath.Join(dir, "go"))
	return in, err
}

// Image builds the disk image of arch (make image).
func (p *Project) Image(ctx context.Context, arch string) (Result, error) {
	in, err := p.Prepare(ctx, arch, p.Version, p.ArchDir(arch))
	if err != nil {
		return Result{}, err
	}
	res, err := Build(ctx, p.buildOptions(arch, p.ArchDir(arch), p.Version, in))
	if err != nil {
		return res, err
	}
	dst := p.ImagePath(arch)
	os.Remove(dst)
	if err := os.Rename(res.Image, dst); err != nil {
		return res, err
	}
	res.Image = dst
	return res, nil
}

func (p *Project) buildOptions(arch, dir, version string, in Inputs) Options {
	return Options{Arch: arch, Repo: p.Repo, Out: dir, Cache: filepath.Join(p.Out, "cache"), Version: version, Epoch: p.Epoch,
		Outpostd: in.Outpostd, Outpostctl: in.Outpostctl, Factory: in.Factory, BundlePub: in.BundlePub, Log: p.Log}
}

// Bundle signs the slot image that Image built for arch (make bundle).
func (p *Project) Bundle(arch string) (string, error) {
	p.defaults()
	rootfs := filepath.Join(p.ArchDir(arch), "binaries", "rootfs.squashfs")
	if _, err := os.Stat(rootfs); err != nil {
		return "", fmt.Errorf("images: no slot image of %s: run make image ARCH=%s first: %w", arch, arch, err)
	}
	if _, err := EnsureKey(p.BundleKey()); err != nil {
		return "", err
	}
	out := p.BundlePath(arch)
	_, err := MakeBundle(BundleOptions{Rootfs: rootfs, Key: p.BundleKey(), Arch: arch, Version: p.Version, Epoch: p.Epoch, Out: out})
	return out, err
}

// Variant builds a slot image of arch for tests: version stamped into the
// binaries, and outpostd replaced by brokenDaemon when it is not "".
func (p *Project) Variant(ctx context.Context, arch, version, brokenDaemon string) (string, error) {
	dir := filepath.Join(p.ArchDir(arch), "variant-"+strings.NewReplacer("/", "_", " ", "_").Replace(version))
	in, err := p.Prepare(ctx, arch, version, dir)
	if err != nil {
		return "", err
	}
	if brokenDaemon != "" {
		in.Outpostd = brokenDaemon
	}
	o := p.buildOptions(arch, dir, version, in)
	o.RootfsOnly = true
	res, err := Build(ctx, o)
	return res.Rootfs, err
}
