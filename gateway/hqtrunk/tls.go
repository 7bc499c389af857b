package hqtrunk

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/outpost/outpost/gateway/resolve"
	"github.com/outpost/outpost/siptarget"
)

// HQ over TLS. The box opens its TLS connections to HQ itself before a
// probe, call or REGISTER needs one (dial.go): SNI and verification use
// the name of the target dialled, the chain is checked against hq.ca_pem
// (the system roots when empty), and hq.client_cert_pem/key_pem are
// presented for mutual TLS. The name is the pool's domain (hq.domain,
// hq.backup.domain: RFC 5922 §4, the domain the box was configured with,
// not an SRV target), else a static target's host name, else the IP of a
// static IP literal (whose certificate must then carry it).
//
// sipgo still dials by itself when a request reaches an HQ address with
// no connection without passing Connect (an in-dialog request after the
// connection closed), with the one tls.Config of the user agent
// (ClientTLS). It sets that config's ServerName to the IP it dials, so Go
// would check the certificate for the IP and send no SNI, and the
// handshake's ConnectionState does not say which peer it is. So ClientTLS
// skips Go's own check and verifies itself: the chain against HQ's
// roots, and the leaf against any of HQ's names (a certificate for the
// backup pool's name is then accepted from a primary target: both are
// HQ). Such a connection carries no SNI. It reads the running HQ trunk at
// each handshake, so a push applies to the next connection.

// hqTLS is the TLS client side of an HQ trunk: parsed from Config when
// the trunk is built, so bad PEM refuses the push.
type hqTLS struct {
	roots *x509.CertPool   // nil = the system roots
	cert  *tls.Certificate // nil = no client certificate
}

func newHQTLS(cfg Config) (hqTLS, error) {
	var h hqTLS
	if cfg.CAPEM != "" {
		h.roots = x509.NewCertPool()
		if !h.roots.AppendCertsFromPEM([]byte(cfg.CAPEM)) {
			return hqTLS{}, errors.New("hq: ca_pem holds no certificate")
		}
	}
	if cfg.ClientCertPEM != "" || cfg.ClientKeyPEM != "" {
		c, err := tls.X509KeyPair([]byte(cfg.ClientCertPEM), []byte(cfg.ClientKeyPEM))
		if err != nil {
			return hqTLS{}, fmt.Errorf("hq: client certificate: %w", err)
		}
		h.cert = &c
	}
	return h, nil
}

// ClientTLS is the tls.Config sipgo dials TLS with (see above); current
// is the running trunk (nil = no HQ), read at each handshake.
func ClientTLS(current func() *Trunk) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Checked by VerifyConnection against HQ's names, not the dialled IP.
		InsecureSkipVerify: true,
		VerifyConnection:   func(cs tls.ConnectionState) error { return current().verify(cs) },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if h := current(); h != nil && h.tls.cert != nil {
				return h.tls.cert, nil
			}
			return &tls.Certificate{}, nil // none: the server decides
		},
	}
}

// verify checks a TLS server's certificate chain against HQ's roots and
// its leaf against HQ's names (see above).
func (h *Trunk) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	if h == nil {
		return errors.New("tls: no HQ configured to verify a server against")
	}
	opts := x509.VerifyOptions{Roots: h.tls.roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	names := h.tlsNames()
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("tls: certificate of %s: %w", strings.Join(names, " or "), err)
	}
	var errs []error
	for _, n := range names {
		err := leaf.VerifyHostname(n)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return errors.New("tls: HQ has no name to verify a certificate against")
	}
	return fmt.Errorf("tls: certificate does not name HQ: %w", errors.Join(errs...))
}

// tlsNames are the names an HQ server's certificate may carry: each
// pool's domain, else its static targets' hosts.
func (h *Trunk) tlsNames() []string {
	var out []string
	add := func(n string) {
		if n = strings.TrimSuffix(n, "."); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	pools := []Pool{{Domain: h.cfg.Domain, Static: h.cfg.Static}}
	if b := h.cfg.Backup; b != nil {
		pools = append(pools, *b)
	}
	for _, p := range pools {
		if p.Domain != "" {
			add(p.Domain)
			continue
		}
		for _, t := range p.Static {
			add(t.Host)
		}
	}
	return out
}

// hqName is the name HQ is known by for a resolved target of a pool with
// domain domain: the domain when set, else the static target's host name;
// "" for a static IP literal.
func hqName(domain string, t resolve.Target) string {
	if domain != "" {
		return domain
	}
	if _, err := netip.ParseAddr(t.Host); err == nil {
		return ""
	}
	return strings.TrimSuffix(t.Host, ".")
}

// learn records the names of the pool's resolved targets, by address.
func (pool *hqPool) learn(ts []resolve.Target) {
	names := make(map[netip.Addr]string, len(ts))
	for _, t := range ts {
		if n := hqName(pool.domain, t); n != "" {
			names[t.Addr.Addr().Unmap()] = n
		}
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	pool.names = names
}

func (pool *hqPool) nameOf(ip netip.Addr) string {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.names[ip]
}

// tlsName is the name the HQ server at ip is known by ("" = unknown: a
// static IP literal, or not an HQ target).
func (h *Trunk) tlsName(ip netip.Addr) string {
	for _, pool := range h.pools {
		if n := pool.nameOf(ip); n != "" {
			return n
		}
	}
	return ""
}

// RequestHost is the host of the Request-URI of a request to the HQ
// target ("tls:198.18.1.10:5061"): the HQ domain (or a static target's
// host name), so that a domain-routed HQ (a Lync pool) recognises the
// request as its own; "" = the target's address (or a nil trunk).
func (h *Trunk) RequestHost(target string) string {
	if h == nil {
		return ""
	}
	g, err := siptarget.Parse(target, siptarget.UDP)
	if err != nil || !g.IsIP() {
		return ""
	}
	return h.tlsName(g.Addr.Unmap())
}
