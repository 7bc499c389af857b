package appliance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/outpost/outpost/appliance/config"
)

// mgmt is the remote management API: the same handler as the admin
// socket, over HTTPS that requires a client certificate signed by
// management.client_ca_pem (HQ's CA). A client without a certificate, or
// with one from another CA, is refused during the handshake.
type mgmt struct {
	log     *slog.Logger
	handler http.Handler

	mu      sync.Mutex
	cur     config.Management
	srv     *http.Server
	bound   string
	serving sync.WaitGroup
}

func newMgmt(h http.Handler, log *slog.Logger) *mgmt { return &mgmt{log: log, handler: h} }

// enabled reports whether the section asks for a remote API. A listen
// address without certificates is refused by validation.
func enabled(m config.Management) bool {
	return m.Listen != "" && m.CertPEM != "" && m.KeyPEM != "" && m.ClientCAPEM != ""
}

func tlsConfig(m config.Management) (*tls.Config, error) {
	cert, err := tls.X509KeyPair([]byte(m.CertPEM), []byte(m.KeyPEM))
	if err != nil {
		return nil, fmt.Errorf("management: certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(m.ClientCAPEM)) {
		return nil, errors.New("management: client_ca_pem holds no certificate")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// Reconfigure applies the management section: an unchanged section keeps
// its listener; a changed one binds the new listener first (so a bad
// address fails the push with nothing changed), then stops the old one.
func (m *mgmt) Reconfigure(_ context.Context, sec config.Management) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sec == m.cur && (m.srv != nil) == enabled(sec) {
		return nil
	}
	var next *http.Server
	var ln net.Listener
	if enabled(sec) {
		tc, err := tlsConfig(sec)
		if err != nil {
			return err
		}
		if ln, err = net.Listen("tcp", sec.Listen); err != nil {
			return fmt.Errorf("management: listen %s: %w", sec.Listen, err)
		}
		next = &http.Server{Handler: m.handler, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelDebug)}
	}
	m.stopLocked()
	m.cur = sec
	if next == nil {
		return nil
	}
	m.srv, m.bound = next, ln.Addr().String()
	m.serving.Go(func() {
		if err := next.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("management api stopped", "err", err)
		}
	})
	m.log.Info("management api listening (mutual TLS)", "addr", m.bound)
	return nil
}

// Addr is the bound address of the HTTPS listener, "" when there is none.
func (m *mgmt) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bound
}

func (m *mgmt) stopLocked() {
	if m.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	m.serving.Wait()
	m.srv, m.bound = nil, ""
}

// Stop closes the listener and waits for its goroutine.
func (m *mgmt) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked()
}
