package images

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/outpost/outpost/images/layout"
)

// EnsureKey returns the bundle signing key at path (PKCS #8 PEM),
// generating a development key pair on first use; the public key is
// written beside it as path + ".pub" (what images bake in).
func EnsureKey(path string) (pubPath string, err error) {
	pubPath = path + ".pub"
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		priv, pub, err := layout.GenerateKey()
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, priv, 0o600); err != nil {
			return "", err
		}
		if err := os.WriteFile(pubPath, pub, 0o644); err != nil {
			return "", err
		}
		return pubPath, nil
	}
	if _, err := os.Stat(pubPath); err != nil {
		return "", fmt.Errorf("images: bundle key %s has no public key beside it: %w", path, err)
	}
	return pubPath, nil
}

// BundleOptions are the inputs of MakeBundle.
type BundleOptions struct {
	Rootfs  string // slot image (Build's Result.Rootfs)
	Key     string // signing key (PKCS #8 PEM)
	Arch    string
	Version string
	Epoch   int64
	Out     string // bundle file
}

// MakeBundle writes a signed update bundle (layout.WriteBundle) of a slot
// image and returns its manifest.
func MakeBundle(o BundleOptions) (layout.Manifest, error) {
	keyPEM, err := os.ReadFile(o.Key)
	if err != nil {
		return layout.Manifest{}, fmt.Errorf("images: bundle key: %w", err)
	}
	key, err := layout.ParsePrivateKey(keyPEM)
	if err != nil {
		return layout.Manifest{}, err
	}
	f, err := os.Open(o.Rootfs)
	if err != nil {
		return layout.Manifest{}, err
	}
	defer f.Close()
	size, sum, err := layout.HashPayload(f)
	if err != nil {
		return layout.Manifest{}, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		return layout.Manifest{}, err
	}
	m := layout.Manifest{Format: layout.BundleFormat, Arch: o.Arch, Version: o.Version, Created: o.Epoch,
		Layout: layout.DiskUUID, Payload: layout.Payload{Name: layout.PayloadRootfs, Size: size, SHA256: sum}}
	tmp := o.Out + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return layout.Manifest{}, err
	}
	if err := layout.WriteBundle(out, m, f, key); err != nil {
		out.Close()
		os.Remove(tmp)
		return layout.Manifest{}, err
	}
	if err := out.Close(); err != nil {
		return layout.Manifest{}, err
	}
	return m, os.Rename(tmp, o.Out)
}
