package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/siptarget"
)

// tlsCA issues certificates for the HQ TLS tests.
type tlsCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTLSCA(t *testing.T) *tlsCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &tlsCA{cert: c, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

func (ca *tlsCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (certPEM, keyPEM string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), DNSNames: []string{name}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := x509.MarshalPKCS8PrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}))
}

// tlsServer accepts TLS on loopback with cert, requiring a client
// certificate signed by clientCA when set; handshakes run until the test
// ends.
func tlsServer(t *testing.T, certPEM, keyPEM string, clientCA *tlsCA) string {
	t.Helper()
	cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != nil {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, x509.NewCertPool()
		cfg.ClientCAs.AddCert(clientCA.cert)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return l.Addr().String()
}

// dialHQ dials addr as sipgo does: the config of clientTLS with the IP as
// ServerName.
func dialHQ(s *Server, addr string) error {
	cfg := s.clientTLS()
	cfg.ServerName = "127.0.0.1"
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	// TLS 1.3: the server's verdict on our certificate arrives with the
	// first read.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	c.Close()
	if err != nil && !strings.Contains(err.Error(), "EOF") {
		return err
	}
	return nil
}

// An HQ server is verified against hq.ca_pem and HQ's name (the domain,
// not the dialled IP); the box's client certificate is presented for
// mutual TLS.
func TestVerifyHQ(t *testing.T) {
	ca, other := newTLSCA(t), newTLSCA(t)
	hqCert, hqKey := ca.issue(t, "hq.example", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, "branch.example", x509.ExtKeyUsageClientAuth)
	addr := tlsServer(t, hqCert, hqKey, ca)
	target := siptarget.MustParse("tls:"+addr, "")

	for _, tc := range []struct {
		name string
		cfg  HQConfig
		want string // "" = accepted, else in the error
	}{
		{"domain and client certificate", HQConfig{Domain: "hq.example", Static: []siptarget.Target{target}, CAPEM: ca.pem, ClientCertPEM: clientCert, ClientKeyPEM: clientKey}, ""},
		{"other name", HQConfig{Domain: "hq.other", Static: []siptarget.Target{target}, CAPEM: ca.pem, ClientCertPEM: clientCert, ClientKeyPEM: clientKey}, "does not name HQ"},
		{"static IP without domain", HQConfig{Static: []siptarget.Target{target}, CAPEM: ca.pem, ClientCertPEM: clientCert, ClientKeyPEM: clientKey}, "does not name HQ"},
		{"other CA", HQConfig{Domain: "hq.example", Static: []siptarget.Target{target}, CAPEM: other.pem, ClientCertPEM: clientCert, ClientKeyPEM: clientKey}, "certificate signed by unknown authority"},
		{"no client certificate", HQConfig{Domain: "hq.example", Static: []siptarget.Target{target}, CAPEM: ca.pem}, "certificate required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := newHQTrunk(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := &Server{}
			s.hqNow.Store(h)
			err = dialHQ(s, addr)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// With hq.domain set, requests to a static target carry the domain in
// the Request-URI; a static IP literal without a domain keeps its address.
func TestRequestHost(t *testing.T) {
	static := []siptarget.Target{siptarget.MustParse("tls:198.18.1.10:5061", "")}
	h, err := newHQTrunk(HQConfig{Domain: "hq.example", Static: static})
	if err != nil {
		t.Fatal(err)
	}
	names, err := h.Targets(t.Context())
	if err != nil || len(names) != 1 {
		t.Fatalf("targets %v, %v", names, err)
	}
	if got := h.RequestHost(names[0]); got != "hq.example" {
		t.Errorf("RequestHost(%s) = %q, want hq.example", names[0], got)
	}
	h, _ = newHQTrunk(HQConfig{Static: static})
	names, _ = h.Targets(t.Context())
	if got := h.RequestHost(names[0]); got != "" {
		t.Errorf("RequestHost(%s) without domain = %q, want the address", names[0], got)
	}
}
