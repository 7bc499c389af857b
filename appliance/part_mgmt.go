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
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
)

// mgmt is the remote management API: the same handler as the admin
// socket, over HTTPS that requires a client certificate signed by
// management.client_ca_pem (HQ's CA). A client without a certificate, or
// with one from another CA, is refused during the handshake; one the CA
// signed but that management.allowed_clients does not name, or whose
// serial is in management.revoked_serials, gets 403 on every request.
type mgmt struct {
	log     *slog.Logger
	handler http.Handler
	limits  serverLimits // mgmtLimits; tests shorten them

	// access is the client list in force. It is swapped on commit without
	// touching the listener, and read by every request.
	access   atomic.Pointer[clientAccess]
	refusals refusalLog

	mu   sync.Mutex
	cur  endpoint // what the running listener was built from
	slot httpSlot
}

func newMgmt(h http.Handler, log *slog.Logger) *mgmt {
	m := &mgmt{log: log, handler: h, limits: mgmtLimits, slot: httpSlot{name: "management api", log: log}}
	m.access.Store(&clientAccess{})
	m.refusals.now = time.Now
	return m
}

// Limits of the HTTPS server. The API's requests are small (a document is
// at most 16 MiB and usually well under 1 MiB) and its answers are quick,
// except a firmware upload: see mgmtUploadTimeout.
const (
	// mgmtReadHeaderTimeout is how long a client has to send the request
	// line and headers: a connection that trickles them (slowloris) is
	// closed then instead of holding a goroutine and a socket.
	mgmtReadHeaderTimeout = 10 * time.Second
	// mgmtReadTimeout bounds reading one whole request, body included:
	// a 16 MiB document over a 1 Mbit/s branch link takes about 2 minutes.
	mgmtReadTimeout = 5 * time.Minute
	// mgmtWriteTimeout bounds the time from the end of the request headers
	// to the end of the answer, so it includes reading the body and the
	// handler's work (an apply takes seconds); hence as long as the read.
	mgmtWriteTimeout = 5 * time.Minute
	// mgmtIdleTimeout closes a keep-alive connection that carries no
	// request for this long. HQ tooling polls more often than this or
	// reconnects; an idle connection costs the box a socket and memory.
	mgmtIdleTimeout = 2 * time.Minute
	// mgmtMaxHeaderBytes bounds the request line and headers: HQ's
	// requests carry a handful of short headers. Larger requests get 431.
	mgmtMaxHeaderBytes = 64 << 10
	// mgmtUploadTimeout replaces the read and write timeouts for a
	// firmware upload (PUT /api/v1/firmware, up to 512 MiB) from an
	// allowed client: a 50 MB bundle takes 7 minutes at 1 Mbit/s and
	// 26 minutes at 256 kbit/s, and the write to the slot follows.
	mgmtUploadTimeout = 30 * time.Minute
)

// serverLimits are the timeouts and header limit of the HTTPS server.
type serverLimits struct {
	readHeader, read, write, idle, upload time.Duration
	maxHeaderBytes                        int
}

var mgmtLimits = serverLimits{
	readHeader: mgmtReadHeaderTimeout, read: mgmtReadTimeout, write: mgmtWriteTimeout,
	idle: mgmtIdleTimeout, upload: mgmtUploadTimeout, maxHeaderBytes: mgmtMaxHeaderBytes,
}

// enabled reports whether the section asks for a remote API. A listen
// address without certificates is refused by validation.
func enabled(m config.Management) bool {
	return m.Listen != "" && m.CertPEM != "" && m.KeyPEM != "" && m.ClientCAPEM != ""
}

// endpoint is what the listener is built from: a change of it rebinds,
// a change of the client list does not.
type endpoint struct{ listen, cert, key, clientCA string }

func endpointOf(m config.Management) endpoint {
	return endpoint{m.Listen, m.CertPEM, m.KeyPEM, m.ClientCAPEM}
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

// clientAccess is management.allowed_clients and revoked_serials, applied
// to the client certificates the CA verified.
type clientAccess struct {
	allowed []string        // empty = every certificate the CA signed
	revoked map[string]bool // serials as config.NormalizeSerial gives them
}

func newClientAccess(m config.Management) *clientAccess {
	a := &clientAccess{allowed: slices.Clone(m.AllowedClients), revoked: map[string]bool{}}
	for _, s := range m.EffectiveRevokedSerials() {
		a.revoked[s] = true
	}
	return a
}

// Reasons for refusing a verified client certificate (the 403 body).
const (
	refusedRevoked    = "client certificate revoked"
	refusedNotAllowed = "client certificate not allowed"
)

// refusal is why c may not act, "" when it may: its serial is revoked, or
// neither its subject CN nor one of its DNS, email or URI subject
// alternative names is in the allowed list (DNS names compare without
// regard to case, the others exactly).
func (a *clientAccess) refusal(c *x509.Certificate) string {
	if a.revoked[c.SerialNumber.Text(16)] {
		return refusedRevoked
	}
	if len(a.allowed) == 0 {
		return ""
	}
	for _, name := range a.allowed {
		if name == c.Subject.CommonName || slices.Contains(c.EmailAddresses, name) ||
			slices.ContainsFunc(c.DNSNames, func(d string) bool { return strings.EqualFold(d, name) }) ||
			slices.ContainsFunc(c.URIs, func(u *url.URL) bool { return u.String() == name }) {
			return ""
		}
	}
	return refusedNotAllowed
}

// guard serves next to clients the access list lets act, and answers 403
// with a JSON error to the others. It also gives an allowed firmware
// upload its longer deadlines.
func (m *mgmt) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reason := "client certificate required" // not reached: the handshake requires one
		var cert *x509.Certificate
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cert = r.TLS.PeerCertificates[0]
			reason = m.access.Load().refusal(cert)
		}
		if reason != "" {
			m.logRefusal(r, cert, reason)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: reason})
			return
		}
		if r.Method == http.MethodPut && r.URL.Path == "/api/v1/firmware" && m.limits.upload > 0 {
			rc := http.NewResponseController(w)
			deadline := time.Now().Add(m.limits.upload)
			_ = rc.SetReadDeadline(deadline)
			_ = rc.SetWriteDeadline(deadline)
		}
		next.ServeHTTP(w, r)
	})
}

// logRefusal logs a refused request, at most once a minute per client
// certificate, so that a client retrying in a loop does not fill the log.
func (m *mgmt) logRefusal(r *http.Request, c *x509.Certificate, reason string) {
	var cn, serial string
	if c != nil {
		cn, serial = c.Subject.CommonName, c.SerialNumber.Text(16)
	}
	if !m.refusals.first(cn + "/" + serial) {
		return
	}
	m.log.Warn("management api: request refused (repeats for this client are not logged for a minute)",
		"reason", reason, "cn", cn, "serial", serial, "remote", r.RemoteAddr, "path", r.URL.Path)
}

// refusalLog remembers when each refused client was last logged.
type refusalLog struct {
	now  func() time.Time
	mu   sync.Mutex
	last map[string]time.Time
}

const (
	refusalLogEvery = time.Minute // at most one line per client per this
	refusalLogMax   = 1024        // clients remembered at once
)

// first reports whether a refusal of client should be logged now, and if
// so remembers it.
func (l *refusalLog) first(client string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[client]; ok && now.Sub(t) < refusalLogEvery {
		return false
	}
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	if len(l.last) >= refusalLogMax {
		for k, t := range l.last {
			if now.Sub(t) >= refusalLogEvery {
				delete(l.last, k)
			}
		}
		if len(l.last) >= refusalLogMax {
			return false // a flood of distinct certificates: already logged
		}
	}
	l.last[client] = now
	return true
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
		AllowedClients               []string `json:",omitempty"`
		RevokedSerials               []string `json:",omitempty"`
	}{c.Listen, enabled(c.Management), c.CertPEM != "", c.KeyPEM != "", c.ClientCAPEM != "",
		c.AllowedClients, c.EffectiveRevokedSerials()})
}

func (*mgmt) name() string { return "management" }

// prepare parses the certificates and binds the new listener when the
// listen address or a certificate changed; commit stops the old listener
// and serves the new one, abort closes the new one. The client list
// (allowed_clients, revoked_serials) is swapped on commit either way,
// without rebinding: it applies from the next request on, also on
// connections already open.
func (m *mgmt) prepare(_ context.Context, next *partConfigs) (change, error) {
	sec := next.Management.Management
	ep, access := endpointOf(sec), newClientAccess(sec)
	m.mu.Lock()
	cur := m.cur
	m.mu.Unlock()
	same := ep == cur && m.slot.up() == enabled(sec)
	if same {
		return funcs{commit: func() { m.access.Store(access) }}, nil
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
		srv = m.newServer(tc)
	}
	return funcs{
		commit: func() {
			m.access.Store(access)
			m.swap(ep, srv, ln)
		},
		abort: func() {
			if ln != nil {
				ln.Close()
			}
		},
	}, nil
}

// newServer is the HTTPS server: the guarded handler within m.limits.
func (m *mgmt) newServer(tc *tls.Config) *http.Server {
	l := m.limits
	return &http.Server{
		Handler:           m.guard(m.handler),
		TLSConfig:         tc,
		ReadHeaderTimeout: l.readHeader,
		ReadTimeout:       l.read,
		WriteTimeout:      l.write,
		IdleTimeout:       l.idle,
		MaxHeaderBytes:    l.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
	}
}

// swap records the endpoint and replaces the server.
func (m *mgmt) swap(ep endpoint, srv *http.Server, ln net.Listener) {
	m.mu.Lock()
	m.cur = ep
	m.mu.Unlock()
	m.slot.swap(srv, ln)
}

// Addr is the bound address of the HTTPS listener, "" when there is none.
func (m *mgmt) Addr() string { return m.slot.Addr() }

// Stop closes the listener and waits for its goroutine.
func (m *mgmt) Stop() { m.slot.Stop() }
