package siptest

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// Wait bounds every wait of the harness.
const Wait = 10 * time.Second

// UA is a sipgo user agent with its server, for one test. Its cleanup
// (registered by NewUA, so it runs after the test's later cleanups, such
// as stopping the part under test) waits for Busy to reach 0, stops
// delivering messages, closes the sockets and the user agent, and waits
// for the servers to return.
type UA struct {
	*sipgo.UserAgent
	Server *sipgo.Server
	// Busy counts handlers still running, if the test keeps it: cleanup
	// waits (bounded) for 0 first, so that an exchange under way (the ACK
	// of a 487 after a CANCEL) ends inside its transaction.
	Busy atomic.Int64

	t       testing.TB
	closing atomic.Bool
	mu      sync.Mutex
	closers []func() error
	wg      sync.WaitGroup
}

// NewUA makes a UA with opts (sipgo.WithUserAgent and the like).
func NewUA(t testing.TB, opts ...sipgo.UserAgentOption) *UA {
	t.Helper()
	u := &UA{t: t}
	// Once closing, the sockets deliver nothing: a message arriving while
	// the UA closes (a late ACK) would otherwise find no listener in
	// sipgo's pool and get a fresh socket, with a reader nobody stops.
	quiet := func(_ sip.TransportReadProps, b []byte) ([]byte, error) {
		if u.closing.Load() {
			return nil, nil
		}
		return b, nil
	}
	ua, err := sipgo.NewUA(append(opts, sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerReadFilter(quiet)))...)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sipgo.NewServer(ua)
	if err != nil {
		t.Fatal(err)
	}
	u.UserAgent, u.Server = ua, srv
	t.Cleanup(u.close)
	return u
}

func (u *UA) close() {
	Until(u.t, "handlers to finish", func() bool { return u.Busy.Load() == 0 })
	u.closing.Store(true)
	u.mu.Lock()
	for _, c := range u.closers {
		_ = c()
	}
	u.mu.Unlock()
	_ = u.UserAgent.Close()
	done := make(chan struct{})
	go func() { u.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(Wait):
		u.t.Error("siptest: server did not stop")
	}
}

// ListenUDP serves a new socket on 127.0.0.1:0 and returns its address
// once sipgo has it in its pool: ServeUDP registers the socket from its
// own goroutine, and a request pinned to it (Laddr) before that fails.
func (u *UA) ListenUDP() string {
	u.t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		u.t.Fatal(err)
	}
	return u.ServeUDP(conn)
}

// ServeUDP is ListenUDP on a socket the test made.
func (u *UA) ServeUDP(conn net.PacketConn) string {
	u.t.Helper()
	u.serve(conn.Close, func() error { return u.Server.ServeUDP(conn) })
	addr := conn.LocalAddr().String()
	Until(u.t, "listener "+addr+" in sipgo's pool", func() bool {
		c, err := u.TransportLayer().GetConnection("udp", addr)
		return err == nil && c != nil
	})
	return addr
}

// ListenTCP serves a new listener on 127.0.0.1:0 and returns its
// address. The socket is bound and listening on return: connections wait
// in its backlog until the server accepts them.
func (u *UA) ListenTCP() string {
	u.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		u.t.Fatal(err)
	}
	u.serve(ln.Close, func() error { return u.Server.ServeTCP(ln) })
	return ln.Addr().String()
}

func (u *UA) serve(closer func() error, run func() error) {
	u.mu.Lock()
	u.closers = append(u.closers, closer)
	u.mu.Unlock()
	u.wg.Go(func() { _ = run() })
}

// Client makes a sipgo client of the UA.
func (u *UA) Client(opts ...sipgo.ClientOption) *sipgo.Client {
	u.t.Helper()
	c, err := sipgo.NewClient(u.UserAgent, opts...)
	if err != nil {
		u.t.Fatal(err)
	}
	return c
}

// Logger logs at debug level to the test's log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Do sends req with c and returns its final response, failing the test
// on a transaction error or when none came within Wait.
func Do(t testing.TB, c *sipgo.Client, req *sip.Request) *sip.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	res, err := c.Do(ctx, req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.Recipient.String(), err)
	}
	return res
}
