package gateway

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/textproto"
	"slices"
	"strings"
	"sync"
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

// sipTLSPeer is an HQ server over TLS that answers every request 200 and
// records the SNI of each handshake and each request line.
type sipTLSPeer struct {
	addr  string
	mu    sync.Mutex
	snis  []string
	lines []string
}

func startSIPTLSPeer(t *testing.T, certPEM, keyPEM string) *sipTLSPeer {
	t.Helper()
	cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	p := &sipTLSPeer{}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			p.mu.Lock()
			p.snis = append(p.snis, h.ServerName)
			p.mu.Unlock()
			return nil, nil
		}}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.addr = l.Addr().String()
	var wg sync.WaitGroup
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		l.Close()
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			cmu.Lock()
			conns = append(conns, c)
			cmu.Unlock()
			wg.Go(func() { p.serve(c) })
		}
	})
	return p
}

func (p *sipTLSPeer) serve(c net.Conn) {
	r := textproto.NewReader(bufio.NewReader(c))
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		if line == "" {
			continue
		}
		hdr, err := r.ReadMIMEHeader()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.lines = append(p.lines, line)
		p.mu.Unlock()
		var b strings.Builder
		b.WriteString("SIP/2.0 200 OK\r\n")
		for _, k := range []string{"Via", "From", "To", "Call-Id", "Cseq"} {
			for _, v := range hdr.Values(k) {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
		}
		b.WriteString("Content-Length: 0\r\n\r\n")
		if _, err := c.Write([]byte(b.String())); err != nil {
			return
		}
	}
}

func (p *sipTLSPeer) seen() (snis, lines []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.snis), slices.Clone(p.lines)
}

// The HQ prober reaches a TLS target over a connection the box opened
// itself (SNI hq.example, verified for that name) and keeps reusing it;
// the probes name the HQ domain in the Request-URI.
func TestHQProbesOverTLS(t *testing.T) {
	ca := newTLSCA(t)
	cert, key := ca.issue(t, "hq.example", x509.ExtKeyUsageServerAuth)
	peer := startSIPTLSPeer(t, cert, key)
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.HQTrunk = &HQConfig{Domain: "hq.example", Static: []siptarget.Target{siptarget.MustParse("tls:"+peer.addr, "")},
		CAPEM: ca.pem, ProbeInterval: 100 * time.Millisecond, DownAfter: 1, UpAfter: 1}
	s := startServer(t, cfg)
	// Probe results have no event of their own: poll, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := s.HQHealth()
		if len(h) == 1 && h[0].Up && h[0].ConsecutiveOK >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hq target not probed up over TLS: %+v", h)
		}
		time.Sleep(50 * time.Millisecond)
	}
	snis, lines := peer.seen()
	if !slices.Equal(snis, []string{"hq.example"}) {
		t.Errorf("handshakes with SNI %q, want one with hq.example", snis)
	}
	for _, l := range lines {
		if l != "OPTIONS sip:hq.example SIP/2.0" {
			t.Errorf("request line %q, want OPTIONS sip:hq.example", l)
		}
	}
}
