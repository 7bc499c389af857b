package siptest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"

	"github.com/outpost/outpost/sipauth"
)

// Wire joins header lines (the request or status line first) into a
// message without a body: CRLF after each line, Content-Length: 0 unless
// a line sets it, and the blank line.
func Wire(lines ...string) string {
	var b strings.Builder
	cl := false
	for _, l := range lines {
		b.WriteString(l + "\r\n")
		if k, _, _ := strings.Cut(l, ":"); strings.EqualFold(strings.TrimSpace(k), "Content-Length") {
			cl = true
		}
	}
	if !cl {
		b.WriteString("Content-Length: 0\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

// Parse reads wire text as a request or response (T is *sip.Request or
// *sip.Response) and fails the test if it is not one.
func Parse[T sip.Message](t testing.TB, text string) T {
	t.Helper()
	m, err := sip.ParseMessage([]byte(text))
	if err != nil {
		t.Fatalf("parse test message: %v\n%s", err, text)
	}
	v, ok := m.(T)
	if !ok {
		t.Fatalf("test message is a %T:\n%s", m, text)
	}
	return v
}

// RoundTrip writes m as wire text and parses it back, as a peer would
// read it: what a part builds must be valid SIP.
func RoundTrip[T sip.Message](m T) (T, error) {
	var zero T
	back, err := sip.ParseMessage([]byte(m.String()))
	if err != nil {
		return zero, fmt.Errorf("%T does not parse: %w\n%s", m, err, m)
	}
	v, ok := back.(T)
	if !ok {
		return zero, fmt.Errorf("%T parsed back as %T", m, back)
	}
	return v, nil
}

// Header is the value of a wire-text message's first header called name
// ("" if none).
func Header(text, name string) string {
	for _, l := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Creds is who answers a challenge, for what request.
type Creds struct {
	User, Password string
	Method, URI    string
	// Algorithm picks the challenge of this algorithm ("MD5", "SHA-256");
	// "" takes the first that sipauth can answer.
	Algorithm string
	// NC is the nonce count to send; 0 means 1.
	NC int
}

// Answer is the Authorization (for a 401) or Proxy-Authorization (407)
// value answering res, computed by sipauth.
func Answer(t testing.TB, res *sip.Response, c Creds) string {
	t.Helper()
	hdr, _ := sipauth.Headers(res.StatusCode)
	var chals []string
	for _, h := range res.GetHeaders(hdr) {
		if c.Algorithm == "" {
			chals = append(chals, h.Value())
		} else if ch, err := digest.ParseChallenge(h.Value()); err == nil && strings.EqualFold(ch.Algorithm, c.Algorithm) {
			chals = append(chals, h.Value())
		}
	}
	dc := sipauth.Client{Username: c.User, Password: c.Password}
	if _, err := dc.Challenge(res.StatusCode, chals); err != nil {
		t.Fatalf("answer %s challenge: %v\n%s", c.Algorithm, err, res)
	}
	var value string
	for range max(c.NC, 1) {
		_, v, err := dc.Authorization(c.Method, c.URI)
		if err != nil {
			t.Fatal(err)
		}
		value = v
	}
	return value
}

// AnswerText is Answer for a response read as wire text.
func AnswerText(t testing.TB, text string, c Creds) string {
	t.Helper()
	return Answer(t, Parse[*sip.Response](t, text), c)
}

// Peer is a UDP socket on 127.0.0.1:0 that sends wire text to one
// address and reads what comes back.
type Peer struct {
	t    testing.TB
	Conn net.PacketConn
	to   net.Addr
	buf  []byte
}

// NewPeer opens a Peer towards addr ("host:port", or a listen string
// "udp:host:port"); the test's end closes it.
func NewPeer(t testing.TB, addr string) *Peer {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	to, err := net.ResolveUDPAddr("udp", strings.TrimPrefix(addr, "udp:"))
	if err != nil {
		t.Fatal(err)
	}
	return &Peer{t: t, Conn: c, to: to, buf: make([]byte, 65536)}
}

// Port is the Peer's local port.
func (p *Peer) Port() int { return p.Conn.LocalAddr().(*net.UDPAddr).Port }

// Send writes msg to the Peer's address.
func (p *Peer) Send(msg string) {
	p.t.Helper()
	if _, err := p.Conn.WriteTo([]byte(msg), p.to); err != nil {
		p.t.Fatal(err)
	}
}

// Read returns the next datagram, failing the test after 5 s.
func (p *Peer) Read() string {
	p.t.Helper()
	p.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := p.Conn.ReadFrom(p.buf)
	if err != nil {
		p.t.Fatalf("no answer: %v", err)
	}
	return string(p.buf[:n])
}
