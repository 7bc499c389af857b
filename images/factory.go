package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Lab PKI file names (outpostctl pki names files after the certificate).
const (
	LabCA      = "ca.pem"
	LabBox     = "outpost-box" // the image's management server certificate
	LabClient  = "hq"          // an HQ client certificate for tests and labs
	SIPPort    = 5060
	MgmtPort   = 8443
	FactoryDoc = "factory.json"
)

// EnsureLab makes the lab CA in dir with outpostctl (the host binary ctl)
// unless it exists, and issues the box's server certificate (SANs: hosts)
// and an HQ client certificate that are missing. Existing files are kept,
// so images built from one lab directory stay byte-identical.
func EnsureLab(ctx context.Context, r runner, ctl, dir string, hosts string) error {
	if _, err := os.Stat(filepath.Join(dir, LabCA)); errors.Is(err, fs.ErrNotExist) {
		if _, err := r.run(ctx, "", ctl, "pki", "init", dir, "--name", "Outpost Lab CA"); err != nil {
			return fmt.Errorf("images: lab CA: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, LabBox+".pem")); errors.Is(err, fs.ErrNotExist) {
		if _, err := r.run(ctx, "", ctl, "pki", "issue", dir, "--server", LabBox, "--host", hosts, "--days", "3650"); err != nil {
			return fmt.Errorf("images: box certificate: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, LabClient+".pem")); errors.Is(err, fs.ErrNotExist) {
		if _, err := r.run(ctx, "", ctl, "pki", "issue", dir, "--client", LabClient, "--days", "3650"); err != nil {
			return fmt.Errorf("images: HQ client certificate: %w", err)
		}
	}
	return nil
}

// FactoryOptions are the inputs of the factory document.
type FactoryOptions struct {
	HQCA    string // PEM: the CA whose client certificates may manage the box
	BoxCert string // PEM: the management API's server certificate
	BoxKey  string // PEM: its key
}

// MakeFactory returns the document a freshly flashed box runs until HQ
// pushes its own (zero-touch): SIP on every interface (UDP and TCP on the
// wildcard address), the management API over mutual TLS on every
// interface, trusting only HQ's CA, standalone mode, no users yet.
func MakeFactory(o FactoryOptions) ([]byte, error) {
	read := func(what, p string) (string, error) {
		if p == "" {
			return "", fmt.Errorf("images: factory document: no %s file given", what)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("images: factory document: %s: %w", what, err)
		}
		return string(b), nil
	}
	ca, err := read("HQ CA", o.HQCA)
	if err != nil {
		return nil, err
	}
	cert, err := read("box certificate", o.BoxCert)
	if err != nil {
		return nil, err
	}
	key, err := read("box key", o.BoxKey)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{
		"schema": 1,
		"site":   map[string]any{"name": "outpost-factory", "domain": "outpost.local"},
		"sip": map[string]any{
			"listen": []string{fmt.Sprintf("udp:0.0.0.0:%d", SIPPort), fmt.Sprintf("tcp:0.0.0.0:%d", SIPPort)},
			"realm":  "outpost.local",
		},
		"pstn":     map[string]any{"emergency": []string{"112", "911"}},
		"dialplan": []any{map[string]any{"name": "local", "match": `^1\d{3}$`, "route": "local"}},
		"management": map[string]any{
			"listen":        fmt.Sprintf(":%d", MgmtPort),
			"cert_pem":      cert,
			"key_pem":       key,
			"client_ca_pem": ca,
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
