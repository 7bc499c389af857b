package gateway

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outpost/outpost/gateway/listen"
)

// TLSCert is the certificate (chain, leaf first) and private key, in PEM,
// that the tls listeners present to phones. A change applies to the next
// handshake; listeners are not rebound for it.
type TLSCert struct {
	CertPEM string
	KeyPEM  string
}

// errNoTLSCert: a tls listener with no certificate to present.
var errNoTLSCert = errors.New("gateway: a tls listener needs a certificate (Config.TLS)")

// parse returns the certificate, nil when none is set; an error when it is
// bad, or missing while specs have a tls listener.
func (c TLSCert) parse(specs []listen.Spec) (*tls.Certificate, error) {
	if c.CertPEM == "" && c.KeyPEM == "" {
		for _, sp := range specs {
			if sp.Transport == "tls" {
				return nil, errNoTLSCert
			}
		}
		return nil, nil
	}
	cert, err := tls.X509KeyPair([]byte(c.CertPEM), []byte(c.KeyPEM))
	if err != nil {
		return nil, fmt.Errorf("gateway: tls certificate: %w", err)
	}
	return &cert, nil
}

// certificate is the tls listeners' GetCertificate.
func (s *Server) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.now.Load().tlsCert; c != nil {
		return c, nil
	}
	return nil, errNoTLSCert
}

// CertInfo describes a certificate for status: subject, validity and the
// SHA-256 fingerprint of its DER form (what a phone's administrator pins
// or compares), colon-separated upper-case hex.
type CertInfo struct {
	Subject     string    `json:"subject"`
	Issuer      string    `json:"issuer"`
	NotAfter    time.Time `json:"not_after"`
	SHA256      string    `json:"sha256"`
	DNSNames    []string  `json:"dns_names,omitempty"`
	IPAddresses []string  `json:"ip_addresses,omitempty"`
}

// DescribeCert describes the first certificate of a PEM chain.
func DescribeCert(certPEM string) (CertInfo, error) {
	b, _ := pem.Decode([]byte(certPEM))
	if b == nil || b.Type != "CERTIFICATE" {
		return CertInfo{}, errors.New("no PEM certificate")
	}
	x, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return CertInfo{}, err
	}
	return describe(x), nil
}

func describe(x *x509.Certificate) CertInfo {
	sum := sha256.Sum256(x.Raw)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	ci := CertInfo{Subject: x.Subject.String(), Issuer: x.Issuer.String(), NotAfter: x.NotAfter.UTC(), SHA256: b.String(), DNSNames: x.DNSNames}
	for _, ip := range x.IPAddresses {
		ci.IPAddresses = append(ci.IPAddresses, ip.String())
	}
	return ci
}

// TLSCertInfo describes the certificate the tls listeners present; ok is
// false when there is none.
func (s *Server) TLSCertInfo() (CertInfo, bool) {
	c := s.now.Load().tlsCert
	if c == nil || len(c.Certificate) == 0 {
		return CertInfo{}, false
	}
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return CertInfo{}, false
	}
	return describe(x), true
}
