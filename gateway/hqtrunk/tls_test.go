package hqtrunk

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/siptest"
	"github.com/outpost/outpost/siptarget"
)

// tlsServer accepts TLS on loopback with cert, requiring a client
// certificate signed by clientCA when set; handshakes run until the test
// ends.
func tlsServer(t *testing.T, certPEM, keyPEM string, clientCA *siptest.CA) string {
	t.Helper()
	cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != nil {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, x509.NewCertPool()
		cfg.ClientCAs.AddCert(clientCA.Cert)
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

// dial dials addr as sipgo does: the config of ClientTLS, for trunk h,
// with the IP as ServerName.
func dial(h *Trunk, addr string) error {
	cfg := ClientTLS(func() *Trunk { return h })
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
func TestVerify(t *testing.T) {
	ca, other := siptest.NewCA(t), siptest.NewCA(t)
	hqCert, hqKey := ca.Issue(t, "hq.example", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.Issue(t, "branch.example", x509.ExtKeyUsageClientAuth)
	addr := tlsServer(t, hqCert, hqKey, ca)
	target := siptarget.MustParse("tls:"+addr, "")

	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = accepted, else in the error
	}{
		{"domain and client certificate", Config{Domain: "hq.example", Static: []siptarget.Target{target}, CAPEM: ca.PEM, ClientCertPEM: clientCert, ClientKeyPEM: clientKey}, ""},
		{"other name", Config{Domain: "hq.other", Static: []siptarget.Target{target}, CAPEM: ca.PEM, ClientCertPEM: clientCert, ClientKeyPEM: clientKey}, "does not name HQ"},
		{"static IP without domain", Config{Static: []siptarget.Target{target}, CAPEM: ca.PEM, ClientCertPEM: clientCert, ClientKeyPEM: clientKey}, "does not name HQ"},
		{"other CA", Config{Domain: "hq.example", Static: []siptarget.Target{target}, CAPEM: other.PEM, ClientCertPEM: clientCert, ClientKeyPEM: clientKey}, "certificate signed by unknown authority"},
		{"no client certificate", Config{Domain: "hq.example", Static: []siptarget.Target{target}, CAPEM: ca.PEM}, "certificate required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = dial(h, addr)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
