package gateway

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/siptest"
	"github.com/outpost/outpost/siptarget"
)

// A PSTN gateway over TLS is refused when configured, not dropped at call
// time: the box's TLS client configuration is HQ's.
func TestPSTNOverTLSRefused(t *testing.T) {
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.PSTN = []PSTNGateway{{Name: "gw", Target: siptarget.MustParse("tls:198.18.3.2", "")}}
	if s, err := New(t.Context(), cfg, nil, nil); err == nil {
		s.Close()
		t.Error("a PSTN gateway over TLS was accepted")
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
	ca := siptest.NewCA(t)
	cert, key := ca.Issue(t, "hq.example", x509.ExtKeyUsageServerAuth)
	peer := startSIPTLSPeer(t, cert, key)
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.HQTrunk = &HQConfig{Domain: "hq.example", Static: []siptarget.Target{siptarget.MustParse("tls:"+peer.addr, "")},
		CAPEM: ca.PEM, ProbeInterval: 100 * time.Millisecond, DownAfter: 1, UpAfter: 1}
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
