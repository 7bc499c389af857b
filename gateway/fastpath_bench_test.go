package gateway

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/digest"
	"github.com/outpost/outpost/gateway/registrar"
)

// The fast-path benchmarks feed datagrams to the read filter exactly as
// sipgo's UDP loop does and count what the path writes back on a socket
// that only records it: everything the daemon does per REGISTER except the
// two system calls. The REGISTERs are SIPp's (bench/peers/sipp/reg_auth.xml)
// over 1000 users, with a new Call-ID per registration as SIPp sends them.

const benchUsers = 1000

// benchSocket is the listener the fast path answers on: it keeps the last
// datagram written.
type benchSocket struct {
	net.PacketConn // nil: only LocalAddr and WriteTo are called
	local          net.Addr
	last           []byte
	writes         int
}

func (s *benchSocket) LocalAddr() net.Addr { return s.local }
func (s *benchSocket) WriteTo(b []byte, _ net.Addr) (int, error) {
	s.last = append(s.last[:0], b...)
	s.writes++
	return len(b), nil
}

type benchPath struct {
	srv   *Server
	sock  *benchSocket
	props sip.TransportReadProps
}

func newBenchPath(b *testing.B) *benchPath {
	b.Helper()
	users := make([]registrar.User, benchUsers)
	for i := range users {
		ext, pw := benchUser(i), fmt.Sprintf("pw%04d", i)
		users[i] = registrar.User{Extension: ext, HA1MD5: digest.HA1(digest.MD5, ext, realm, pw), HA1SHA256: digest.HA1(digest.SHA256, ext, realm, pw)}
	}
	cfg := Config{Listen: []Listen{{Transport: "udp", Addr: "127.0.0.1:0"}}, Registrar: registrar.Config{Realm: realm, Users: users, StormRate: -1}}
	s, err := New(b.Context(), cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	local := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5060}
	sock := &benchSocket{local: local}
	s.fp.SetSockets([]net.PacketConn{sock})
	return &benchPath{srv: s, sock: sock, props: sip.TransportReadProps{Transport: "UDP", LocalAddr: local, RemoteAddr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5080}}}
}

func benchUser(i int) string { return fmt.Sprintf("user%04d", i) }

// feed passes one datagram through the filter and checks the answer's
// status line.
func (p *benchPath) feed(b *testing.B, msg []byte, status string) {
	n := p.sock.writes
	out, err := p.srv.fp.Filter(p.props, msg)
	if err != nil || out != nil || p.sock.writes != n+1 || !bytes.HasPrefix(p.sock.last, []byte(status)) {
		b.Fatalf("filter: err %v, passed on %t, %d writes, answer %q", err, out != nil, p.sock.writes-n, p.sock.last)
	}
}

// regClient builds SIPp's two REGISTERs for one user without allocating,
// answering the challenge with MD5, qop=auth and a counting nc.
type regClient struct {
	user, nonce string
	ha1         string
	nc          uint64
	buf         []byte
}

var ha2Register = func() string {
	h := md5.Sum([]byte("REGISTER:sip:" + realm))
	return hex.EncodeToString(h[:])
}()

// first is the REGISTER without credentials (→ 401); seq makes the branch
// and Call-ID unique.
func (c *regClient) first(seq uint64) []byte {
	c.buf = c.head(c.buf[:0], seq, 1)
	c.buf = append(c.buf, "Expires: 3600\r\nUser-Agent: sipp-bench\r\nContent-Length: 0\r\n\r\n"...)
	return c.buf
}

// second is the REGISTER with credentials over c.nonce (→ 200).
func (c *regClient) second(seq uint64) []byte {
	c.nc++
	var nc [8]byte
	hexPad(nc[:], c.nc)
	const cnonce = "6b8b4567"
	var in [32 + 1 + 64 + 1 + 8 + 1 + 8 + 1 + 4 + 1 + 32]byte
	s := append(in[:0], c.ha1...)
	s = append(append(s, ':'), c.nonce...)
	s = append(append(s, ':'), nc[:]...)
	s = append(append(s, ':'), cnonce...)
	s = append(append(s, ":auth:"...), ha2Register...)
	sum := md5.Sum(s)
	var resp [32]byte
	hex.Encode(resp[:], sum[:])

	c.buf = c.head(c.buf[:0], seq, 2)
	c.buf = append(c.buf, `Authorization: Digest username="`...)
	c.buf = append(c.buf, c.user...)
	c.buf = append(c.buf, `",realm="`+realm+`",cnonce="`+cnonce+`",nc=`...)
	c.buf = append(c.buf, nc[:]...)
	c.buf = append(c.buf, `,qop=auth,uri="sip:`+realm+`",nonce="`...)
	c.buf = append(c.buf, c.nonce...)
	c.buf = append(c.buf, `",response="`...)
	c.buf = append(c.buf, resp[:]...)
	c.buf = append(c.buf, "\",algorithm=MD5\r\nExpires: 3600\r\nUser-Agent: sipp-bench\r\nContent-Length: 0\r\n\r\n"...)
	return c.buf
}

func (c *regClient) head(b []byte, seq uint64, cseq int) []byte {
	b = append(b, "REGISTER sip:"+realm+" SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bK-"...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(cseq), 10)
	b = append(b, "\r\nMax-Forwards: 70\r\nFrom: <sip:"...)
	b = append(b, c.user...)
	b = append(b, "@"+realm+">;tag=1t"...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, "\r\nTo: <sip:"...)
	b = append(b, c.user...)
	b = append(b, "@"+realm+">\r\nCall-ID: "...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, "-1@127.0.0.1\r\nCSeq: "...)
	b = strconv.AppendInt(b, int64(cseq), 10)
	b = append(b, " REGISTER\r\nContact: <sip:"...)
	b = append(b, c.user...)
	b = append(b, "@127.0.0.1:5080;transport=UDP>\r\n"...)
	return b
}

func hexPad(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = digits[v&15]
		v >>= 4
	}
}

// nonceOf reads the nonce of the first challenge in a 401.
func nonceOf(b *testing.B, res []byte) string {
	i := bytes.Index(res, []byte(`nonce="`))
	if i < 0 {
		b.Fatalf("no nonce in %q", res)
	}
	rest := res[i+len(`nonce="`):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

func newRegClients(b *testing.B, p *benchPath) []*regClient {
	cs := make([]*regClient, benchUsers)
	for i := range cs {
		c := &regClient{user: benchUser(i), ha1: digest.HA1(digest.MD5, benchUser(i), realm, fmt.Sprintf("pw%04d", i))}
		p.feed(b, c.first(uint64(i)), "SIP/2.0 401 ")
		c.nonce = nonceOf(b, p.sock.last)
		cs[i] = c
	}
	return cs
}

// BenchmarkFastPathRegister is one whole registration as SIPp makes it:
// REGISTER in → 401 out, REGISTER with credentials in → 200 out (the
// client reuses its nonce with a new nc, so building the second request
// costs no allocation: allocs/op are the path's).
func BenchmarkFastPathRegister(b *testing.B) {
	p := newBenchPath(b)
	cs := newRegClients(b, p)
	seq := uint64(benchUsers)
	b.ReportAllocs()
	for n := 0; b.Loop(); n++ {
		c := cs[n%benchUsers]
		seq++
		p.feed(b, c.first(seq), "SIP/2.0 401 ")
		p.feed(b, c.second(seq), "SIP/2.0 200 ")
	}
}

// BenchmarkFastPathRegister200 is the second half only: REGISTER with
// credentials in → 200 out (binding update, write-behind queued).
func BenchmarkFastPathRegister200(b *testing.B) {
	p := newBenchPath(b)
	cs := newRegClients(b, p)
	seq := uint64(benchUsers)
	b.ReportAllocs()
	for n := 0; b.Loop(); n++ {
		seq++
		p.feed(b, cs[n%benchUsers].second(seq), "SIP/2.0 200 ")
	}
}

// BenchmarkFastPathChallenge is the first half only: REGISTER in → 401 out.
func BenchmarkFastPathChallenge(b *testing.B) {
	p := newBenchPath(b)
	c := &regClient{user: benchUser(1)}
	seq := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		seq++
		p.feed(b, c.first(seq), "SIP/2.0 401 ")
	}
}

// BenchmarkFastPathRetransmission is a retransmitted REGISTER answered
// from the cache.
func BenchmarkFastPathRetransmission(b *testing.B) {
	p := newBenchPath(b)
	c := &regClient{user: benchUser(1)}
	msg := bytes.Clone(c.first(1))
	p.feed(b, msg, "SIP/2.0 401 ")
	b.ReportAllocs()
	for b.Loop() {
		p.feed(b, msg, "SIP/2.0 401 ")
	}
}
