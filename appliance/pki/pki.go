package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names in a CA directory.
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca-key.pem"
)

// Kind is what a leaf certificate is for.
type Kind int

const (
	// Server is a box's management API certificate (ExtKeyUsage ServerAuth).
	Server Kind = iota + 1
	// Client is an HQ operator's or tool's certificate (ExtKeyUsage ClientAuth).
	Client
)

func (k Kind) String() string {
	switch k {
	case Server:
		return "server"
	case Client:
		return "client"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// backdate absorbs clock skew between the machine that issues and the ones
// that verify.
const backdate = 5 * time.Minute

// InitCA creates dir (0700) with ca.pem and ca-key.pem (0600): a self-signed
// ECDSA P-256 CA with CN=name, valid for years, KeyUsage CertSign|CRLSign,
// BasicConstraints CA:true and MaxPathLen 0 (it signs leaves only). It
// refuses to overwrite an existing ca-key.pem or ca.pem; that error wraps
// fs.ErrExist. An existing dir is used as it is.
func InitCA(dir, name string, years int) error {
	if dir == "" {
		return errors.New("pki: CA directory is empty")
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return errors.New("pki: CA name is empty")
	}
	if years < 1 || years > 100 {
		return fmt.Errorf("pki: CA validity %d years: want 1 to 100", years)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	for _, p := range []string{keyPath, certPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("pki: %s: refusing to overwrite an existing CA: %w", p, fs.ErrExist)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pki: %w", err)
		}
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.AddDate(years, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("pki: sign CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	// The key first and exclusively: a concurrent InitCA loses here.
	if err := writeNew(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeNew(certPath, encodeCert(der), 0o644); err != nil {
		os.Remove(keyPath)
		return err
	}
	return nil
}

// Issue creates NAME.pem and NAME-key.pem (0600) in outDir (created 0700 if
// missing; "" means caDir), signed by the CA in caDir, and returns their
// paths. It replaces an earlier certificate and key of the same name.
//
// A Server certificate has ExtKeyUsage ServerAuth, CN=name and the hosts as
// subject alternative names (IP addresses as IPAddresses, the others as
// DNSNames); it needs at least one host. A Client certificate has
// ExtKeyUsage ClientAuth and CN=name and takes no hosts.
//
// The serial is random (128 bits), NotBefore is 5 minutes ago and the
// validity is days, cut short at the CA's own expiry. name is also the file
// name: letters, digits and . _ - @, not starting with . or -.
func Issue(caDir, outDir, name string, kind Kind, hosts []string, days int) (certPath, keyPath string, err error) {
	if err := checkName(name); err != nil {
		return "", "", err
	}
	if days < 1 || days > 36500 {
		return "", "", fmt.Errorf("pki: validity %d days: want 1 to 36500", days)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	switch kind {
	case Server:
		if len(hosts) == 0 {
			return "", "", errors.New("pki: a server certificate needs at least one host (DNS name or IP address)")
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		seen := map[string]bool{}
		for _, h := range hosts {
			h = strings.TrimSpace(h)
			if h == "" {
				return "", "", errors.New("pki: empty host")
			}
			if ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); ip != nil {
				if !seen[ip.String()] {
					seen[ip.String()] = true
					tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
				}
				continue
			}
			if strings.ContainsAny(h, "/: \t") {
				return "", "", fmt.Errorf("pki: host %q: want a DNS name or an IP address", h)
			}
			h = strings.ToLower(strings.TrimSuffix(h, "."))
			if !seen[h] {
				seen[h] = true
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	case Client:
		if len(hosts) != 0 {
			return "", "", fmt.Errorf("pki: a client certificate takes no hosts (got %q)", hosts)
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		return "", "", fmt.Errorf("pki: unknown certificate kind %d", int(kind))
	}

	caCert, caKey, err := loadCA(caDir)
	if err != nil {
		return "", "", err
	}
	if outDir == "" {
		outDir = caDir
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return "", "", fmt.Errorf("pki: %w", err)
	}
	if strings.EqualFold(name, "ca") && sameDir(caDir, outDir) {
		return "", "", fmt.Errorf("pki: name %q would overwrite the CA in %s", name, caDir)
	}

	now := time.Now()
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.AddDate(0, 0, days)
	if !now.Before(caCert.NotAfter) {
		return "", "", fmt.Errorf("pki: the CA in %s expired on %s", caDir, caCert.NotAfter.Format(time.DateOnly))
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	if tmpl.NotBefore.Before(caCert.NotBefore) {
		tmpl.NotBefore = caCert.NotBefore
	}
	if tmpl.SerialNumber, err = randomSerial(); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("pki: generate key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", fmt.Errorf("pki: sign %s certificate %q: %w", kind, name, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return "", "", err
	}
	certPath = filepath.Join(outDir, name+".pem")
	keyPath = filepath.Join(outDir, name+"-key.pem")
	if err := writeReplace(keyPath, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeReplace(certPath, encodeCert(der), 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// loadCA reads ca.pem and ca-key.pem from dir and checks that they belong
// together and make a CA.
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA key: %w", err)
	}
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("pki: %s: no PEM CERTIFICATE block", certPath)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %s: %w", certPath, err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, fmt.Errorf("pki: %s is not a CA certificate", certPath)
	}
	b, _ = pem.Decode(keyPEM)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, nil, fmt.Errorf("pki: %s: no PEM PRIVATE KEY (PKCS #8) block", keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %s: %w", keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("pki: %s: key of type %T cannot sign", keyPath, k)
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("pki: %s does not belong to %s", keyPath, certPath)
	}
	return cert, signer, nil
}

func checkName(name string) error {
	if name == "" {
		return errors.New("pki: name is empty")
	}
	if len(name) > 64 {
		return fmt.Errorf("pki: name %q: longer than 64 characters", name)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("pki: name %q: must not start with %q", name, name[0])
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._-@", r):
		default:
			return fmt.Errorf("pki: name %q: only letters, digits and . _ - @ (it names the files)", name)
		}
	}
	return nil
}

func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// randomSerial returns a random positive 128-bit serial number.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("pki: serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func encodeKey(key crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// writeNew creates path with perm and data; it fails if path exists.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("pki: %s: refusing to overwrite an existing file: %w", path, err)
		}
		return fmt.Errorf("pki: %w", err)
	}
	err = writeClose(f, data, perm)
	if err != nil {
		os.Remove(path)
	}
	return err
}

// writeReplace writes data to a temporary file next to path and renames it
// over path, so that path is never half-written.
func writeReplace(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	tmp := f.Name()
	if err := writeClose(f, data, perm); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

func writeClose(f *os.File, data []byte, perm os.FileMode) error {
	err := f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}
