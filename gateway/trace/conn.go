package trace

import (
	"bytes"
	"net"
	"strconv"
)

// packetConn traces a UDP socket: one datagram is one message.
type packetConn struct {
	net.PacketConn
	tap *Tap
}

// WrapPacketConn returns pc traced through tap: each datagram read or
// written is offered to tap while it is on. LocalAddr and the rest are
// pc's own (the fast path keys its sockets by LocalAddr).
func WrapPacketConn(pc net.PacketConn, tap *Tap) net.PacketConn {
	return &packetConn{PacketConn: pc, tap: tap}
}

func (c *packetConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := c.PacketConn.ReadFrom(b)
	if n > 0 && c.tap.On() && !keepAlive(b[:n]) {
		c.tap.Emit(In, "udp", c.PacketConn.LocalAddr(), addr, b[:n])
	}
	return n, addr, err
}

func (c *packetConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.PacketConn.WriteTo(b, addr)
	if err == nil && c.tap.On() && !keepAlive(b) {
		c.tap.Emit(Out, "udp", c.PacketConn.LocalAddr(), addr, b)
	}
	return n, err
}

// conn traces a TCP connection. Reads arrive in arbitrary pieces, so the
// incoming stream is cut into messages (stream); sipgo writes one whole
// message per Write, so each Write is one outgoing message.
type conn struct {
	net.Conn
	tap *Tap
	in  stream
	was bool // tracing was on at the previous read
}

// WrapConn returns c traced through tap.
func WrapConn(c net.Conn, tap *Tap) net.Conn { return &conn{Conn: c, tap: tap} }

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	on := c.tap.On()
	if on && n > 0 {
		if !c.was {
			c.in.reset() // what was buffered before tracing went off is stale
		}
		c.in.feed(b[:n], func(m []byte) { c.tap.Emit(In, "tcp", c.Conn.LocalAddr(), c.Conn.RemoteAddr(), m) })
	}
	c.was = on
	return n, err
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 && c.tap.On() && !keepAlive(b[:n]) {
		c.tap.Emit(Out, "tcp", c.Conn.LocalAddr(), c.Conn.RemoteAddr(), b[:n])
	}
	return n, err
}

// keepAlive reports whether b is only CR and LF (RFC 5626 §3.5.1 keep-alives),
// or NULs (sipgo ignores those too): not a SIP message.
func keepAlive(b []byte) bool { return len(bytes.Trim(b, "\r\n\x00")) == 0 }

// maxMessage bounds what stream buffers: sipgo refuses larger messages too.
const maxMessage = 64 << 10

// stream cuts a TCP byte stream into SIP messages (RFC 3261 §18.3: the
// header section up to an empty line, then Content-Length bytes of body).
// It may start in the middle of a message (tracing turned on while one
// was arriving): it then skips lines until one that starts a message.
type stream struct{ buf []byte }

func (s *stream) reset() { s.buf = s.buf[:0] }

func (s *stream) feed(p []byte, emit func([]byte)) {
	if len(s.buf)+len(p) > maxMessage {
		s.reset() // garbage or a message too large: resynchronise
		if len(p) > maxMessage {
			return
		}
	}
	s.buf = append(s.buf, p...)
	for {
		s.buf = s.buf[len(s.buf)-len(bytes.TrimLeft(s.buf, "\r\n")):]
		nl := bytes.IndexByte(s.buf, '\n')
		if nl < 0 {
			return
		}
		if !startLine(s.buf[:nl]) {
			s.buf = s.buf[nl+1:] // not at a message: skip the line
			continue
		}
		end := headerEnd(s.buf)
		if end < 0 {
			return
		}
		total := end + contentLength(s.buf[:end])
		if len(s.buf) < total {
			return
		}
		emit(s.buf[:total])
		s.buf = s.buf[:copy(s.buf, s.buf[total:])]
	}
}

// startLine reports whether line starts a SIP message: "SIP/2.0 200 OK"
// or "METHOD uri SIP/2.0".
func startLine(line []byte) bool {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if bytes.HasPrefix(line, []byte("SIP/2.0 ")) {
		return true
	}
	if !bytes.HasSuffix(line, []byte(" SIP/2.0")) {
		return false
	}
	m, _, _ := bytes.Cut(line, []byte(" "))
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return len(m) > 0
}

// headerEnd is the offset just after the empty line ending the header
// section; -1 when it has not arrived.
func headerEnd(b []byte) int {
	i := bytes.Index(b, []byte("\r\n\r\n"))
	j := bytes.Index(b, []byte("\n\n"))
	switch {
	case i >= 0 && (j < 0 || i < j):
		return i + 4
	case j >= 0:
		return j + 2
	}
	return -1
}

func contentLength(h []byte) int {
	v := Header(h, "content-length", "l")
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 0 || n > maxMessage {
		return 0
	}
	return n
}
