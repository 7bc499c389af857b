package appliance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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
		return nil, fmt.Errorf("certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(m.ClientCAPEM)) {
		return nil, errors.New("client_ca_pem holds no certificate")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// mgmtConfig is the management part's configuration: the document's
// management section (certificates are parsed in prepare).
type mgmtConfig struct {
	config.Management
}

// MarshalJSON keeps keys out of golden files and logs.
func (c mgmtConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Listen                       string
		Enabled, Cert, Key, ClientCA bool
	}{c.Listen, enabled(c.Management), c.CertPEM != "", c.KeyPEM != "", c.ClientCAPEM != ""})
}

func (*mgmt) name() string { return "management" }

// prepare parses the certificates and binds the new listener; an
// unchanged section changes nothing. Commit stops the old listener and
// serves the new one; Abort closes the new one.
func (m *mgmt) prepare(_ context.Context, next *partConfigs) (change, error) {
	sec := next.Management.Management
	m.mu.Lock()
	same := sec == m.cur && (m.srv != nil) == enabled(sec)
	m.mu.Unlock()
	if same {
		return funcs{}, nil
	}
	var srv *http.Server
	var ln net.Listener
	if enabled(sec) {
		tc, err := tlsConfig(sec)
		if err != nil {
			return nil, err
		}
		if ln, err = net.Listen("tcp", sec.Listen); err != nil {
			return nil, fmt.Errorf("listen %s: %w", sec.Listen, err)
		}
		srv = &http.Server{Handler: m.handler, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelDebug)}
	}
	return funcs{
		commit: func() { m.swap(sec, srv, ln) },
		abort: func() {
			if ln != nil {
				ln.Close()
			}
		},
	}, nil
}

// swap stops the running server and serves srv on ln (none when srv is nil).
func (m *mgmt) swap(sec config.Management, srv *http.Server, ln net.Listener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopLocked()
	m.cur = sec
	if srv == nil {
		return
	}
	m.srv, m.bound = srv, ln.Addr().String()
	m.serving.Go(func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("management api stopped", "err", err)
		}
	})
	m.log.Info("management api listening (mutual TLS)", "addr", m.bound)
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
