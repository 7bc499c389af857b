package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lab is a CA with a server certificate for 127.0.0.1 and box.example and
// a client certificate.
type lab struct {
	caDir                 string
	pool                  *x509.CertPool
	serverCert, serverKey string
	clientCert, clientKey string
}

func newLab(t *testing.T) lab {
	t.Helper()
	l := lab{caDir: filepath.Join(t.TempDir(), "ca")}
	if err := InitCA(l.caDir, "Outpost Lab CA", 10); err != nil {
		t.Fatal(err)
	}
	var err error
	l.serverCert, l.serverKey, err = Issue(l.caDir, "", "box1", Server, []string{"127.0.0.1", "box.example"}, 30)
	if err != nil {
		t.Fatal(err)
	}
	l.clientCert, l.clientKey, err = Issue(l.caDir, filepath.Join(t.TempDir(), "hq"), "hq-operator", Client, nil, 30)
	if err != nil {
		t.Fatal(err)
	}
	l.pool = x509.NewCertPool()
	if !l.pool.AppendCertsFromPEM(readFile(t, filepath.Join(l.caDir, CACertFile))) {
		t.Fatal("ca.pem: no certificate")
	}
	return l
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseCert(t *testing.T, p string) *x509.Certificate {
	t.Helper()
	b, rest := pem.Decode(readFile(t, p))
	if b == nil || b.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("%s: want exactly one CERTIFICATE block", p)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func checkKey(t *testing.T, p string, cert *x509.Certificate) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", p, st.Mode().Perm())
	}
	b, _ := pem.Decode(readFile(t, p))
	if b == nil || b.Type != "PRIVATE KEY" {
		t.Fatalf("%s: want a PKCS #8 PRIVATE KEY block", p)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve.Params().Name != "P-256" {
		t.Fatalf("%s: key %T, want ECDSA P-256", p, k)
	}
	if !ek.PublicKey.Equal(cert.PublicKey) {
		t.Errorf("%s does not match its certificate", p)
	}
}

func TestCertificates(t *testing.T) {
	l := newLab(t)
	st, err := os.Stat(l.caDir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("CA dir mode %v, want 0700", st.Mode().Perm())
	}

	ca := parseCert(t, filepath.Join(l.caDir, CACertFile))
	checkKey(t, filepath.Join(l.caDir, CAKeyFile), ca)
	if ca.Subject.CommonName != "Outpost Lab CA" || !ca.IsCA || !ca.BasicConstraintsValid ||
		ca.MaxPathLen != 0 || !ca.MaxPathLenZero || ca.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("CA: CN %q IsCA %v MaxPathLen %d zero %v KeyUsage %v", ca.Subject.CommonName, ca.IsCA, ca.MaxPathLen, ca.MaxPathLenZero, ca.KeyUsage)
	}
	if y := ca.NotAfter.Sub(ca.NotBefore).Hours() / 24 / 365; y < 9.9 || y > 10.1 {
		t.Errorf("CA validity %.2f years, want 10", y)
	}
	if err := ca.CheckSignatureFrom(ca); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}

	srv := parseCert(t, l.serverCert)
	checkKey(t, l.serverKey, srv)
	cli := parseCert(t, l.clientCert)
	checkKey(t, l.clientKey, cli)
	if filepath.Dir(l.serverCert) != l.caDir || filepath.Base(l.serverCert) != "box1.pem" || filepath.Base(l.serverKey) != "box1-key.pem" {
		t.Errorf("server files %s %s", l.serverCert, l.serverKey)
	}
	if srv.Subject.CommonName != "box1" || len(srv.DNSNames) != 1 || srv.DNSNames[0] != "box.example" ||
		len(srv.IPAddresses) != 1 || !srv.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("server: CN %q DNS %q IP %v", srv.Subject.CommonName, srv.DNSNames, srv.IPAddresses)
	}
	if cli.Subject.CommonName != "hq-operator" || len(cli.DNSNames)+len(cli.IPAddresses) != 0 {
		t.Errorf("client: CN %q DNS %q IP %v", cli.Subject.CommonName, cli.DNSNames, cli.IPAddresses)
	}
	for _, c := range []struct {
		cert *x509.Certificate
		eku  x509.ExtKeyUsage
	}{{srv, x509.ExtKeyUsageServerAuth}, {cli, x509.ExtKeyUsageClientAuth}} {
		name := c.cert.Subject.CommonName
		if len(c.cert.ExtKeyUsage) != 1 || c.cert.ExtKeyUsage[0] != c.eku {
			t.Errorf("%s: ExtKeyUsage %v, want [%v]", name, c.cert.ExtKeyUsage, c.eku)
		}
		if c.cert.IsCA || c.cert.KeyUsage != x509.KeyUsageDigitalSignature {
			t.Errorf("%s: IsCA %v KeyUsage %v", name, c.cert.IsCA, c.cert.KeyUsage)
		}
		if c.cert.SerialNumber.Sign() <= 0 || c.cert.SerialNumber.BitLen() > 128 {
			t.Errorf("%s: serial %v", name, c.cert.SerialNumber)
		}
		if d := time.Since(c.cert.NotBefore); d < 4*time.Minute || d > 6*time.Minute {
			t.Errorf("%s: NotBefore %v ago, want about 5m", name, d)
		}
		if d := c.cert.NotAfter.Sub(c.cert.NotBefore); d != 30*24*time.Hour+5*time.Minute {
			t.Errorf("%s: validity %v", name, d)
		}
		if err := c.cert.CheckSignatureFrom(ca); err != nil {
			t.Errorf("%s: not signed by the CA: %v", name, err)
		}
	}
	if srv.SerialNumber.Cmp(cli.SerialNumber) == 0 {
		t.Error("two certificates with the same serial")
	}
	if _, err := srv.Verify(x509.VerifyOptions{Roots: l.pool, DNSName: "box.example"}); err != nil {
		t.Error(err)
	}
	if _, err := srv.Verify(x509.VerifyOptions{Roots: l.pool, DNSName: "other.example"}); err == nil {
		t.Error("server certificate verified for a name it does not have")
	}
}

// logBuf collects the server's error log (TLS handshake errors).
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestMutualTLS(t *testing.T) {
	l := newLab(t)
	other := filepath.Join(t.TempDir(), "other")
	if err := InitCA(other, "Some Other CA", 1); err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, err := Issue(other, "", "hq-operator", Client, nil, 30)
	if err != nil {
		t.Fatal(err)
	}

	serverPair, err := tls.LoadX509KeyPair(l.serverCert, l.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "hello "+r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{serverPair},
		ClientCAs:    l.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
	var serverLog logBuf
	srv.Config.ErrorLog = log.New(&serverLog, "", 0)
	srv.StartTLS()
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("server URL %s", srv.URL)
	}

	pair := func(cert, key string) []tls.Certificate {
		p, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{p}
	}
	// get is a request with a client configured like api.NewTLSClient;
	// with force it sends certs[0] even when its issuer is not among the
	// server's acceptable CAs (crypto/tls would then send none), so that
	// the server itself must refuse it.
	get := func(certs []tls.Certificate, force bool, serverName string, maxVersion uint16) (string, error) {
		cfg := &tls.Config{
			Certificates: certs,
			RootCAs:      l.pool,
			ServerName:   serverName,
			MinVersion:   tls.VersionTLS12,
			MaxVersion:   maxVersion,
		}
		if force {
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if len(certs) == 0 {
					return &tls.Certificate{}, nil
				}
				return &certs[0], nil
			}
		}
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	for _, v := range []struct {
		name string
		max  uint16
	}{{"TLS1.2", tls.VersionTLS12}, {"TLS1.3", tls.VersionTLS13}} {
		t.Run(v.name, func(t *testing.T) {
			// The right client certificate, the server verified by IP and by name.
			for _, sn := range []string{"", "box.example"} {
				body, err := get(pair(l.clientCert, l.clientKey), false, sn, v.max)
				if err != nil || body != "hello hq-operator" {
					t.Fatalf("server name %q: %q, %v", sn, body, err)
				}
			}
			// A name the server certificate does not have.
			if _, err := get(pair(l.clientCert, l.clientKey), false, "other.example", v.max); err == nil {
				t.Error("client accepted a server certificate for another name")
			}

			refused := func(what string, certs []tls.Certificate, wantLog string) {
				t.Helper()
				before := served.Load()
				_, err := get(certs, true, "", v.max)
				if err == nil {
					t.Errorf("%s: request succeeded", what)
					return
				}
				if served.Load() != before {
					t.Errorf("%s: the handler ran", what)
				}
				// The server logs the failed handshake, after the client
				// may already have returned (TLS 1.3 client auth).
				deadline := time.Now().Add(5 * time.Second)
				for !strings.Contains(serverLog.String(), wantLog) {
					if time.Now().After(deadline) {
						t.Errorf("%s: client error %v; server log has no %q:\n%s", what, err, wantLog, serverLog.String())
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				t.Logf("%s: %v", what, err)
			}
			serverLog.mu.Lock()
			serverLog.b.Reset()
			serverLog.mu.Unlock()
			refused("no client certificate", nil, "didn't provide a certificate")
			refused("client certificate from another CA", pair(otherCert, otherKey), "unknown authority")
			refused("server certificate as a client certificate", pair(l.serverCert, l.serverKey), "incompatible key usage")
		})
	}
}

func TestInitCARefusesOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if err := InitCA(dir, "Lab CA", 1); err != nil {
		t.Fatal(err)
	}
	certBefore := readFile(t, filepath.Join(dir, CACertFile))
	keyBefore := readFile(t, filepath.Join(dir, CAKeyFile))
	err := InitCA(dir, "Lab CA", 1)
	if err == nil || !strings.Contains(err.Error(), CAKeyFile) || !strings.HasPrefix(err.Error(), "pki: ") || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second InitCA: %v", err)
	}
	if !bytes.Equal(certBefore, readFile(t, filepath.Join(dir, CACertFile))) || !bytes.Equal(keyBefore, readFile(t, filepath.Join(dir, CAKeyFile))) {
		t.Error("second InitCA changed the CA")
	}
	// A lone ca.pem is not replaced either.
	os.Remove(filepath.Join(dir, CAKeyFile))
	if err := InitCA(dir, "Lab CA", 1); err == nil || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("InitCA over a lone ca.pem: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, CAKeyFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("InitCA over a lone ca.pem left a key: %v", err)
	}
}

func TestIssueReplaces(t *testing.T) {
	l := newLab(t)
	first := parseCert(t, l.serverCert)
	c, k, err := Issue(l.caDir, "", "box1", Server, []string{"10.0.0.1", "10.0.0.1", "Box.Example."}, 1)
	if err != nil || c != l.serverCert || k != l.serverKey {
		t.Fatalf("reissue: %s %s %v", c, k, err)
	}
	second := parseCert(t, c)
	checkKey(t, k, second)
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Error("reissue kept the serial")
	}
	if len(second.IPAddresses) != 1 || !second.IPAddresses[0].Equal(net.ParseIP("10.0.0.1")) || len(second.DNSNames) != 1 || second.DNSNames[0] != "box.example" {
		t.Errorf("reissue SANs: %v %q", second.IPAddresses, second.DNSNames)
	}
	ents, err := os.ReadDir(l.caDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestIssueClampsToCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if err := InitCA(dir, "Lab CA", 1); err != nil {
		t.Fatal(err)
	}
	c, _, err := Issue(dir, "", "hq", Client, nil, 3650)
	if err != nil {
		t.Fatal(err)
	}
	if got, ca := parseCert(t, c), parseCert(t, filepath.Join(dir, CACertFile)); !got.NotAfter.Equal(ca.NotAfter) {
		t.Errorf("NotAfter %v, want the CA's %v", got.NotAfter, ca.NotAfter)
	}
}

func TestErrors(t *testing.T) {
	l := newLab(t)
	empty := t.TempDir()
	for _, c := range []struct {
		what string
		err  func() error
		want string
	}{
		{"InitCA no name", func() error { return InitCA(t.TempDir(), " ", 1) }, "name is empty"},
		{"InitCA zero years", func() error { return InitCA(t.TempDir(), "x", 0) }, "years"},
		{"server without hosts", func() error { _, _, err := Issue(l.caDir, "", "b", Server, nil, 1); return err }, "at least one host"},
		{"server bad host", func() error { _, _, err := Issue(l.caDir, "", "b", Server, []string{"b.example:443"}, 1); return err }, "DNS name or an IP"},
		{"server empty host", func() error { _, _, err := Issue(l.caDir, "", "b", Server, []string{""}, 1); return err }, "empty host"},
		{"client with hosts", func() error { _, _, err := Issue(l.caDir, "", "c", Client, []string{"x"}, 1); return err }, "takes no hosts"},
		{"bad kind", func() error { _, _, err := Issue(l.caDir, "", "c", 0, nil, 1); return err }, "kind"},
		{"zero days", func() error { _, _, err := Issue(l.caDir, "", "c", Client, nil, 0); return err }, "days"},
		{"path in name", func() error { _, _, err := Issue(l.caDir, "", "a/c", Client, nil, 1); return err }, "only letters"},
		{"dot name", func() error { _, _, err := Issue(l.caDir, "", "..", Client, nil, 1); return err }, "must not start"},
		{"empty name", func() error { _, _, err := Issue(l.caDir, "", "", Client, nil, 1); return err }, "name is empty"},
		{"name ca over the CA", func() error { _, _, err := Issue(l.caDir, l.caDir, "CA", Client, nil, 1); return err }, "overwrite the CA"},
		{"no CA", func() error { _, _, err := Issue(empty, "", "c", Client, nil, 1); return err }, "CA certificate"},
		{"leaf as CA", func() error {
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, CACertFile), readFile(t, l.serverCert), 0o644)
			os.WriteFile(filepath.Join(d, CAKeyFile), readFile(t, l.serverKey), 0o600)
			_, _, err := Issue(d, "", "c", Client, nil, 1)
			return err
		}, "not a CA"},
		{"mismatched CA key", func() error {
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, CACertFile), readFile(t, filepath.Join(l.caDir, CACertFile)), 0o644)
			os.WriteFile(filepath.Join(d, CAKeyFile), readFile(t, l.clientKey), 0o600)
			_, _, err := Issue(d, "", "c", Client, nil, 1)
			return err
		}, "does not belong"},
	} {
		err := c.err()
		if err == nil || !strings.HasPrefix(err.Error(), "pki: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want pki: ...%s", c.what, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("failed Issue wrote files: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(l.caDir, "CA.pem")); err == nil {
		t.Error("Issue named CA wrote a file")
	}
}
