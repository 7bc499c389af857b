// Package pki makes a small certificate authority and the certificates for
// the management API's mutual TLS: a server certificate for a box and client
// certificates for HQ operators and tools.
//
// It is for labs and tests. Production uses the customer's PKI: the box only
// needs a server certificate and the CA that signs HQ's client certificates,
// wherever they come from.
//
// Keys are ECDSA P-256, written as PKCS #8 PEM ("PRIVATE KEY") with mode
// 0600; certificates are PEM with mode 0644. A CA directory holds ca.pem and
// ca-key.pem.
package pki
