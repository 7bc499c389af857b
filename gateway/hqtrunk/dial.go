package hqtrunk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/outpost/outpost/siptarget"
)

// The box opens its TLS connections to HQ itself (Connect), before the
// first request of a probe, call or upstream REGISTER to a target that has
// none: each handshake then sends SNI and is verified for the name of the
// target it dials (hq.domain, a static host, or its IP), which sipgo's
// own dial cannot do (tls.go). The connection is handed to sipgo
// through a listener sipgo serves (ServeTLS): sipgo reads it and sends
// every later request to that address over it, as for a connection a
// phone opened. A connection that closes is opened again by the next
// request: by Connect, or (an in-dialog request, which does not pass
// here) by sipgo with the ClientTLS configuration.

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

// Dialer opens the TLS connections to HQ of one Server and hands them to
// its sipgo stack.
type Dialer struct {
	// has reports whether sipgo holds a TLS connection to dest already.
	has   func(dest string) bool
	mu    sync.Mutex
	inj   *connInjector          // nil while the Server is not running
	locks map[string]*sync.Mutex // per destination: one dial at a time
}

// NewDialer makes a Dialer; has tells whether sipgo already holds a TLS
// connection to "ip:port".
func NewDialer(has func(dest string) bool) *Dialer { return &Dialer{has: has} }

func (d *Dialer) lock(dest string) *sync.Mutex {
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

func (d *Dialer) injector() *connInjector {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inj
}

// Listener starts the Dialer: sipgo must serve (ServeTLS) the listener it
// returns, whose connections are the ones the Dialer opens, until Stop.
func (d *Dialer) Listener() net.Listener {
	inj := newConnInjector()
	d.mu.Lock()
	d.inj = inj
	d.mu.Unlock()
	return inj
}

// Stop closes the listener; later Connects open nothing.
func (d *Dialer) Stop() {
	d.mu.Lock()
	inj := d.inj
	d.inj = nil
	d.mu.Unlock()
	if inj != nil {
		inj.Close()
	}
}

// UseDialer makes the trunk open its TLS connections through d (Connect).
// It is called once, before the trunk is shared.
func (h *Trunk) UseDialer(d *Dialer) { h.dialer = d }

// Connect makes sure sipgo has a TLS connection to the HQ target
// ("tls:198.18.1.10:5061"), opening one when it has none, before a probe,
// a B leg's INVITE or an upstream REGISTER (the B2BUA's and the upstream
// agent's optional Connector interface). Other transports, a trunk without
// a Dialer and a stopped Dialer need nothing.
func (h *Trunk) Connect(ctx context.Context, target string) error {
	if h == nil || h.dialer == nil {
		return nil
	}
	g, err := siptarget.Parse(target, siptarget.UDP)
	if err != nil || g.Transport != siptarget.TLS || !g.IsIP() {
		return nil
	}
	name := h.tlsName(g.Addr.Unmap())
	if name == "" {
		name = g.Addr.Unmap().String() // a static IP literal: its certificate names the IP
	}
	return h.dial(ctx, g.HostPort(), name)
}

// ConnectRedirect opens a TLS connection to a target that HQ's redirect
// names ("pool2.hq.example:5061", from a sips: or transport=tls Contact),
// verified with HQ's roots for the Contact's host (RFC 5922: the name in
// the URI; an IP literal must be in the certificate), and returns the
// address reached ("198.18.1.21:5061"), where the B leg's requests go. A
// host name is resolved with HQ's DNS servers, each address tried in turn.
func (h *Trunk) ConnectRedirect(ctx context.Context, hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("tls redirect to %q: %w", hostport, err)
	}
	if h == nil || h.dialer == nil || h.dialer.injector() == nil {
		return "", fmt.Errorf("tls redirect to %s: the box opens no TLS connections to HQ", hostport)
	}
	addrs, err := h.pools[0].res.LookupHost(ctx, host)
	if err != nil {
		return "", fmt.Errorf("tls redirect to %s: %w", hostport, err)
	}
	var errs []error
	for _, a := range addrs {
		dest := net.JoinHostPort(a.String(), port)
		if err := h.dial(ctx, dest, strings.TrimSuffix(host, ".")); err != nil {
			errs = append(errs, err)
			continue
		}
		return dest, nil
	}
	return "", errors.Join(errs...)
}

// dial hands sipgo a TLS connection to dest ("ip:port") verified for
// name, unless it holds one already.
func (h *Trunk) dial(ctx context.Context, dest, name string) error {
	d := h.dialer
	inj := d.injector()
	if inj == nil {
		return nil
	}
	m := d.lock(dest)
	m.Lock()
	defer m.Unlock()
	if d.has(dest) {
		return nil
	}
	cfg := &tls.Config{ServerName: name, RootCAs: h.tls.roots, MinVersion: tls.VersionTLS12}
	if h.tls.cert != nil {
		cfg.Certificates = []tls.Certificate{*h.tls.cert}
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
