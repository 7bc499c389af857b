package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
)

// certsProblem checks a PEM bundle of one or more certificates.
func certsProblem(s string) string {
	rest := []byte(s)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Sprintf("unexpected PEM block %q (want CERTIFICATE)", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Sprintf("bad certificate %d: %v", n+1, err)
		}
		n++
	}
	switch {
	case n == 0:
		return "no PEM CERTIFICATE block found"
	case len(bytes.TrimSpace(rest)) > 0:
		return "unexpected data after the PEM blocks"
	}
	return ""
}

// keyProblem checks a PEM private key (PKCS #8, PKCS #1 or SEC 1).
func keyProblem(s string) string {
	b, rest := pem.Decode([]byte(s))
	if b == nil {
		return "no PEM private key block found"
	}
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		_, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		_, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		_, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		if strings.Contains(b.Type, "ENCRYPTED") {
			return fmt.Sprintf("PEM block %q: encrypted keys are not supported", b.Type)
		}
		return fmt.Sprintf("unexpected PEM block %q (want PRIVATE KEY)", b.Type)
	}
	switch {
	case err != nil:
		return fmt.Sprintf("bad private key: %v", err)
	case len(bytes.TrimSpace(rest)) > 0:
		return "unexpected data after the private key"
	}
	return ""
}

// pairProblem checks that the key belongs to the (first) certificate.
func pairProblem(cert, key string) string {
	if _, err := tls.X509KeyPair([]byte(cert), []byte(key)); err != nil {
		return fmt.Sprintf("does not match cert_pem: %v", err)
	}
	return ""
}
