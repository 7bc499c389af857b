package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/outpost/outpost/appliance/pki"
)

// pkiUsage is what outpostctl pki takes; the lead's usage text can list it.
const pkiUsage = `pki init DIR [--name NAME] [--years N]
  pki issue DIR --server NAME --host H[,H...] [--out OUTDIR] [--days N]
  pki issue DIR --client NAME [--out OUTDIR] [--days N]`

const pkiNote = "note: this CA is for labs and tests; production uses the customer's PKI"

// pki makes a lab CA and the certificates for the management API's mutual
// TLS (package pki). It works on local files only and needs no outpostd.
func (c *cmd) pki(_ context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("pki needs a verb: init, issue\n  " + pkiUsage)
	}
	switch args[0] {
	case "init":
		const use = "pki init DIR [--name NAME] [--years N]"
		fs := flag.NewFlagSet("pki init", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		name := fs.String("name", "Outpost Lab CA", "")
		years := fs.Int("years", 10, "")
		dir, err := parseOne(fs, args[1:], "DIR")
		if err != nil {
			return usageError(use + ": " + err.Error())
		}
		if err := pki.InitCA(dir, *name, *years); err != nil {
			return err
		}
		ca, caKey := filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile)
		return c.pkiResult(struct {
			CA    string `json:"ca"`
			CAKey string `json:"ca_key"`
		}{ca, caKey}, ca, caKey)
	case "issue":
		const use = "pki issue DIR (--server NAME --host H[,H...] | --client NAME) [--out OUTDIR] [--days N]"
		fs := flag.NewFlagSet("pki issue", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		server := fs.String("server", "", "")
		client := fs.String("client", "", "")
		var hosts pkiHostList
		fs.Var(&hosts, "host", "")
		out := fs.String("out", "", "")
		days := fs.Int("days", 365, "")
		dir, err := parseOne(fs, args[1:], "DIR")
		if err != nil {
			return usageError(use + ": " + err.Error())
		}
		var (
			kind pki.Kind
			name string
		)
		switch {
		case *server != "" && *client != "":
			return usageError(use + ": --server and --client exclude each other")
		case *server != "":
			if len(hosts) == 0 {
				return usageError(use + ": --server needs --host")
			}
			kind, name = pki.Server, *server
		case *client != "":
			if len(hosts) != 0 {
				return usageError(use + ": --host is for --server only")
			}
			kind, name = pki.Client, *client
		default:
			return usageError(use + ": --server NAME or --client NAME")
		}
		certPath, keyPath, err := pki.Issue(dir, *out, name, kind, hosts, *days)
		if err != nil {
			return err
		}
		return c.pkiResult(struct {
			Cert string `json:"cert"`
			Key  string `json:"key"`
		}{certPath, keyPath}, certPath, keyPath)
	default:
		return usageError(fmt.Sprintf("unknown pki verb %q\n  %s", args[0], pkiUsage))
	}
}

// pkiResult prints the created paths, one per line, or with --json only v
// (whose fields are the same paths); the lab note goes to errOut so that
// stdout stays clean for scripts.
func (c *cmd) pkiResult(v any, paths ...string) error {
	if c.errOut != nil {
		fmt.Fprintln(c.errOut, pkiNote)
	}
	if c.json {
		return writeIndented(c.out, v)
	}
	for _, p := range paths {
		if _, err := fmt.Fprintln(c.out, p); err != nil {
			return err
		}
	}
	return nil
}

// pkiHostList collects --host values, repeated or comma-separated.
type pkiHostList []string

func (h *pkiHostList) String() string { return strings.Join(*h, ",") }

func (h *pkiHostList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			return fmt.Errorf("empty host in %q", v)
		}
		*h = append(*h, s)
	}
	return nil
}
