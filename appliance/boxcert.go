package appliance

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/gateway"
)

// The box's own SIP TLS certificate (sip.tls empty in the document): made
// at first boot, kept in the data directory, the same across restarts
// and firmware updates, so phones that pinned its fingerprint keep
// trusting it.
const (
	BoxCertFile = "sip-tls-cert.pem"
	BoxKeyFile  = "sip-tls-key.pem"
	boxCertDays = 20 * 365
)

// boxCertificate reads the box certificate from dir, or makes and stores
// one when there is none (name is its subject CN and DNS name).
func boxCertificate(dir, name string) (gateway.TLSCert, error) {
	certPath, keyPath := filepath.Join(dir, BoxCertFile), filepath.Join(dir, BoxKeyFile)
	cert, cerr := os.ReadFile(certPath)
	key, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			return gateway.TLSCert{}, fmt.Errorf("box certificate %s: %w", certPath, err)
		}
		return gateway.TLSCert{CertPEM: string(cert), KeyPEM: string(key)}, nil
	}
	if !errors.Is(cerr, fs.ErrNotExist) && cerr != nil {
		return gateway.TLSCert{}, cerr
	}
	if !errors.Is(kerr, fs.ErrNotExist) && kerr != nil {
		return gateway.TLSCert{}, kerr
	}
	c, err := selfSigned(name, time.Now())
	if err != nil {
		return gateway.TLSCert{}, err
	}
	// The key first: a certificate file is only ever next to its key.
	if err := writeAtomic(keyPath, []byte(c.KeyPEM), 0o600); err != nil {
		return gateway.TLSCert{}, err
	}
	if err := writeAtomic(certPath, []byte(c.CertPEM), 0o644); err != nil {
		return gateway.TLSCert{}, err
	}
	return c, nil
}

// selfSigned makes a self-signed ECDSA P-256 server certificate for name.
func selfSigned(name string, now time.Time) (gateway.TLSCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return gateway.TLSCert{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return gateway.TLSCert{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Outpost"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(0, 0, boxCertDays),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return gateway.TLSCert{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return gateway.TLSCert{}, err
	}
	return gateway.TLSCert{
		CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		KeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})),
	}, nil
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// sipTLSStatus describes the certificate the tls: listeners present.
func (a *App) sipTLSStatus(doc *config.Document) *api.Certificate {
	ci, ok := a.gw.TLSCertInfo()
	if !ok {
		return nil
	}
	src := "box"
	if doc != nil && doc.SIP.TLS.CertPEM != "" {
		src = "document"
	}
	return &api.Certificate{Source: src, Subject: ci.Subject, Issuer: ci.Issuer, NotAfter: ci.NotAfter, SHA256: ci.SHA256}
}
