package ctl

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMainPKI runs the pki verbs end to end through Main (it needs the
// "pki" case in cmd.run).
func TestMainPKI(t *testing.T) {
	base := t.TempDir()
	caDir := filepath.Join(base, "ca")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(args, &out, &errOut)
		return out.String(), errOut.String(), code
	}

	out, errOut, code := run("pki", "init", caDir)
	if code != 0 {
		t.Fatalf("pki init: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantCA, wantKey := filepath.Join(caDir, "ca.pem"), filepath.Join(caDir, "ca-key.pem")
	if len(lines) != 2 || lines[0] != wantCA || lines[1] != wantKey || !strings.Contains(errOut, "labs") {
		t.Errorf("pki init printed %q, stderr %q", out, errOut)
	}
	for _, p := range []string{wantCA, wantKey} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}

	// Again: refused, nothing replaced.
	if out, errOut, code := run("pki", "init", caDir); code != 1 || !strings.Contains(errOut, "ca-key.pem") {
		t.Errorf("second pki init: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	// --json as a global flag after the verb, DIR after the flags.
	out, errOut, code = run("pki", "issue", "--server", "box1", "--host", "127.0.0.1,box.example", "--json", "--out", filepath.Join(base, "box1"), caDir)
	if code != 0 {
		t.Fatalf("pki issue --server: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	var issued struct{ Cert, Key string }
	if err := json.Unmarshal([]byte(out), &issued); err != nil {
		t.Fatalf("pki issue --json: %v\n%s", err, out)
	}
	if issued.Cert != filepath.Join(base, "box1", "box1.pem") || issued.Key != filepath.Join(base, "box1", "box1-key.pem") {
		t.Errorf("pki issue --json: %s", out)
	}
	cert := pkiReadCert(t, issued.Cert)
	if len(cert.IPAddresses) != 1 || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "box.example" {
		t.Errorf("server SANs %v %q", cert.IPAddresses, cert.DNSNames)
	}

	out, errOut, code = run("pki", "issue", caDir, "--client", "hq-ops", "--days", "7")
	if code != 0 {
		t.Fatalf("pki issue --client: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || lines[0] != filepath.Join(caDir, "hq-ops.pem") || lines[1] != filepath.Join(caDir, "hq-ops-key.pem") {
		t.Errorf("pki issue --client printed %q", out)
	}
	if c := pkiReadCert(t, filepath.Join(caDir, "hq-ops.pem")); c.Subject.CommonName != "hq-ops" || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("client certificate CN %q EKU %v", c.Subject.CommonName, c.ExtKeyUsage)
	}

	// Usage mistakes exit 2.
	for _, args := range [][]string{
		{"pki"},
		{"pki", "frobnicate"},
		{"pki", "init"},
		{"pki", "issue", caDir},
		{"pki", "issue", caDir, "--server", "b"},
		{"pki", "issue", caDir, "--client", "c", "--host", "x"},
	} {
		if _, errOut, code := run(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, code, errOut)
		}
	}
}

// TestPKIVerb calls cmd.pki directly, without the dispatch in cmd.run.
func TestPKIVerb(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	caDir := filepath.Join(base, "ca")

	var buf, note bytes.Buffer
	c := &cmd{out: &buf, errOut: &note, json: true}
	if err := c.pki(ctx, []string{"init", "--name", "Test CA", "--years", "2", caDir}); err != nil {
		t.Fatal(err)
	}
	var ca struct {
		CA    string `json:"ca"`
		CAKey string `json:"ca_key"`
	}
	if err := json.Unmarshal(buf.Bytes(), &ca); err != nil || ca.CA != filepath.Join(caDir, "ca.pem") || ca.CAKey != filepath.Join(caDir, "ca-key.pem") {
		t.Fatalf("init --json: %s (%v)", buf.String(), err)
	}
	if !strings.Contains(note.String(), "for labs") {
		t.Errorf("no lab note on errOut: %q", note.String())
	}
	if got := pkiReadCert(t, ca.CA); got.Subject.CommonName != "Test CA" || !got.IsCA {
		t.Errorf("CA CN %q IsCA %v", got.Subject.CommonName, got.IsCA)
	}
	if st, err := os.Stat(ca.CAKey); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("ca-key.pem: %v %v", st.Mode(), err)
	}

	// --host repeated and comma-separated; DIR between the flags.
	buf.Reset()
	c.json = false
	c.errOut = nil // no note, no crash
	if err := c.pki(ctx, []string{"issue", "--server", "box2", caDir, "--host", "10.1.2.3", "--host", "box2.example,::1", "--days", "30"}); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(buf.String()), "\n"); len(lines) != 2 || lines[0] != filepath.Join(caDir, "box2.pem") {
		t.Errorf("issue printed %q", buf.String())
	}
	cert := pkiReadCert(t, filepath.Join(caDir, "box2.pem"))
	if len(cert.IPAddresses) != 2 || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "box2.example" {
		t.Errorf("SANs %v %q", cert.IPAddresses, cert.DNSNames)
	}

	for _, args := range [][]string{
		{"init", caDir, "extra"},
		{"issue", caDir, "--server", "b", "--client", "c", "--host", "x"},
		{"issue", caDir, "--server", "b", "--host", "x,,y"},
		{"issue", caDir, "--client", "c", "--days", "many"},
	} {
		var ue usageError
		if err := c.pki(ctx, args); !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	// A bad value that is not a usage mistake comes from package pki.
	if err := c.pki(ctx, []string{"issue", caDir, "--client", "../x"}); err == nil || !strings.HasPrefix(err.Error(), "pki: ") {
		t.Errorf("bad name: %v", err)
	}
}

func pkiReadCert(t *testing.T, p string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", p)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
