package listen

import (
	"net"
	"sync"
	"time"
)

// TCP limits: sipgo keeps a goroutine and a 32 KiB read buffer per
// connection and never times one out, so without limits a peer that opens
// connections and stays silent would exhaust a small box.
const (
	maxTCPConns      = 1024 // ~32 MiB of read buffers at most
	maxTCPConnsPerIP = 64   // one site's NAT with many TCP phones fits
)

// limitedListener refuses connections beyond the limits and closes
// connections that stay silent for longer than idle (a phone registered
// over TCP talks at least once per registration interval).
type limitedListener struct {
	net.Listener
	idle time.Duration

	mu    sync.Mutex
	total int
	perIP map[string]int
}

func newLimitedListener(ln net.Listener, idle time.Duration) *limitedListener {
	return &limitedListener{Listener: ln, idle: idle, perIP: map[string]int{}}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		ok := l.total < maxTCPConns && l.perIP[ip] < maxTCPConnsPerIP
		if ok {
			l.total++
			l.perIP[ip]++
		}
		l.mu.Unlock()
		if !ok {
			c.Close()
			continue
		}
		return &idleConn{Conn: c, l: l, ip: ip}, nil
	}
}

func (l *limitedListener) release(ip string) {
	l.mu.Lock()
	l.total--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
	l.mu.Unlock()
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// idleConn pushes its read deadline forward on every read and gives its
// slot back once when closed.
type idleConn struct {
	net.Conn
	l      *limitedListener
	ip     string
	closed sync.Once
}

func (c *idleConn) Read(b []byte) (int, error) {
	if c.l.idle > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(c.l.idle))
	}
	return c.Conn.Read(b)
}

func (c *idleConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() { c.l.release(c.ip) })
	return err
}
