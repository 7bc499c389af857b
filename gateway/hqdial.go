package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	"github.com/outpost/outpost/siptarget"
)

// The box opens its TLS connections to HQ itself (connectHQ), before the
// first request of a probe, call or upstream REGISTER to a target that has
// none: each handshake then sends SNI and is verified for the name of the
// target it dials (hq.domain, a static host, or its IP), which sipgo's
// own dial cannot do (hqtls.go). The connection is handed to sipgo
// through a listener sipgo serves (ServeTLS): sipgo reads it and sends
// every later request to that address over it, as for a connection a
// phone opened. A connection that closes is opened again by the next
// request: by connectHQ, or (an in-dialog request, which does not pass
// here) by sipgo with the clientTLS configuration.

// connInjector is a net.Listener whose connections are the ones hand
// gives it; sipgo's ServeTLS accepts them.
type connInjector struct {
	addr  net.Addr
	conns chan net.Conn
	// ready: sipgo asked for the next connection, so it has added the
	// previous one to its pool (Serve accepts one at a time).
	ready  chan struct{}
	handed bool // a connection was accepted; owned by the Accept caller
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex // one hand at a time
}

func newConnInjector() *connInjector {
	return &connInjector{addr: &net.TCPAddr{IP: net.IPv4zero}, conns: make(chan net.Conn), ready: make(chan struct{}), done: make(chan struct{})}
}

func (l *connInjector) Accept() (net.Conn, error) {
	if l.handed {
		l.handed = false
		select {
		case l.ready <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	select {
	case c := <-l.conns:
		l.handed = true
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connInjector) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connInjector) Addr() net.Addr { return l.addr }

// hand gives c to sipgo and returns once it is in sipgo's pool.
func (l *connInjector) hand(ctx context.Context, c net.Conn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
		return net.ErrClosed
	case <-ctx.Done():
		c.Close()
		return ctx.Err()
	}
	select {
	case <-l.ready:
		return nil
	case <-l.done:
		return net.ErrClosed
	}
}

// hqDialer is the Server's part that opens TLS connections to HQ.
type hqDialer struct {
	inj   *connInjector // nil while the Server is not running
	mu    sync.Mutex
	locks map[string]*sync.Mutex // per destination: one dial at a time
}

func (d *hqDialer) lock(dest string) *sync.Mutex {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.locks == nil {
		d.locks = map[string]*sync.Mutex{}
	}
	m := d.locks[dest]
	if m == nil {
		m = &sync.Mutex{}
		d.locks[dest] = m
	}
	return m
}

func (d *hqDialer) injector() *connInjector {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inj
}

// run serves the injector under the Server's wait group until stop.
func (s *Server) runHQDialer() {
	inj := newConnInjector()
	s.hqDial.mu.Lock()
	s.hqDial.inj = inj
	s.hqDial.mu.Unlock()
	s.serving.Go(func() { _ = s.srv.ServeTLS(inj) })
}

func (s *Server) stopHQDialer() {
	s.hqDial.mu.Lock()
	inj := s.hqDial.inj
	s.hqDial.inj = nil
	s.hqDial.mu.Unlock()
	if inj != nil {
		inj.Close()
	}
}

// connectHQ makes sure sipgo has a TLS connection to the HQ target
// ("tls:198.18.1.10:5061"), opening one when it has none. Other
// transports, and a Server that is not running, need nothing.
func (s *Server) connectHQ(ctx context.Context, target string) error {
	g, err := siptarget.Parse(target, siptarget.UDP)
	if err != nil || g.Transport != siptarget.TLS || !g.IsIP() {
		return nil
	}
	inj, hq := s.hqDial.injector(), s.hqNow.Load()
	if inj == nil || hq == nil {
		return nil
	}
	dest := g.HostPort()
	m := s.hqDial.lock(dest)
	m.Lock()
	defer m.Unlock()
	if c, _ := s.ua.TransportLayer().GetConnection("tls", dest); c != nil {
		return nil
	}
	name := hq.tlsName(g.Addr.Unmap())
	if name == "" {
		name = g.Addr.Unmap().String() // a static IP literal: its certificate names the IP
	}
	cfg := &tls.Config{ServerName: name, RootCAs: hq.tls.roots, MinVersion: tls.VersionTLS12}
	if hq.tls.cert != nil {
		cfg.Certificates = []tls.Certificate{*hq.tls.cert}
	}
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", dest)
	if err != nil {
		return fmt.Errorf("tls to %s: %w", dest, err)
	}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return fmt.Errorf("tls to %s as %s: %w", dest, name, err)
	}
	return inj.hand(ctx, c)
}

// Connect is connectHQ for the B2BUA and the upstream agent (their
// optional Connector interface): before a request to target.
func (h *hqTrunk) Connect(ctx context.Context, target string) error {
	if h.connect == nil {
		return nil
	}
	return h.connect(ctx, target)
}
