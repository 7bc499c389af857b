package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	icdigest "github.com/icholy/digest"

	"github.com/outpost/outpost/gateway/digest"
	"github.com/outpost/outpost/gateway/registrar"
)

const realm = "gw.test"

func testConfig(listen ...Listen) Config {
	return Config{Listen: listen, Registrar: registrar.Config{Realm: realm, Users: []registrar.User{{
		Extension: "1001",
		HA1MD5:    digest.HA1(digest.MD5, "1001", realm, "pw"),
		HA1SHA256: digest.HA1(digest.SHA256, "1001", realm, "pw"),
	}}}}
}

// startServer runs a gateway until the test ends.
func startServer(t testing.TB, cfg Config, before ...func(*Server)) *Server {
	t.Helper()
	s, err := New(t.Context(), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before { // what the test sets before the server runs
		f(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

// phone is a UDP socket that sends wire text and reads answers.
type phone struct {
	t    testing.TB
	conn net.PacketConn
	to   net.Addr
	buf  []byte // read's, made at the first
}

func newPhone(t testing.TB, server string) *phone {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	to, err := net.ResolveUDPAddr("udp", strings.TrimPrefix(server, "udp:"))
	if err != nil {
		t.Fatal(err)
	}
	return &phone{t: t, conn: c, to: to}
}

func (p *phone) send(msg string) {
	p.t.Helper()
	if _, err := p.conn.WriteTo([]byte(msg), p.to); err != nil {
		p.t.Fatal(err)
	}
}

func (p *phone) read() string {
	p.t.Helper()
	if p.buf == nil {
		p.buf = make([]byte, 65536)
	}
	p.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := p.conn.ReadFrom(p.buf)
	if err != nil {
		p.t.Fatalf("no answer: %v", err)
	}
	return string(p.buf[:n])
}

func (p *phone) register(branch string, cseq int, authz string) string {
	port := p.conn.LocalAddr().(*net.UDPAddr).Port
	m := fmt.Sprintf("REGISTER sip:%s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=%s;rport\r\nMax-Forwards: 70\r\n"+
		"From: <sip:1001@%s>;tag=p1\r\nTo: <sip:1001@%s>\r\nCall-ID: gw-call\r\nCSeq: %d REGISTER\r\n"+
		"Contact: <sip:1001@127.0.0.1:%d>\r\n", realm, port, branch, realm, realm, cseq, port)
	if authz != "" {
		m += "Authorization: " + authz + "\r\n"
	}
	return m + "Content-Length: 0\r\n\r\n"
}

// authorization answers a REGISTER challenge (wire text) as 1001.
func authorization(t testing.TB, challenge string) string {
	t.Helper()
	ch, err := icdigest.ParseChallenge(header(challenge, "WWW-Authenticate"))
	if err != nil {
		t.Fatal(err)
	}
	cr, err := icdigest.Digest(ch, icdigest.Options{Method: "REGISTER", URI: "sip:" + realm, Username: "1001", Password: "pw", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	return cr.String()
}

// registerAs1001 registers the phone's socket as user 1001 (digest).
func (p *phone) registerAs1001() {
	p.t.Helper()
	p.send(p.register("z9hG4bK-r1", 1, ""))
	p.send(p.register("z9hG4bK-r2", 2, authorization(p.t, p.read())))
	if ok := p.read(); !strings.HasPrefix(ok, "SIP/2.0 200") {
		p.t.Fatalf("REGISTER: %q", ok)
	}
}

func header(msg, name string) string {
	for _, l := range strings.Split(msg, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// A retransmitted REGISTER gets the very same answer, from the cache: the
// same challenge, and for the authenticated one the same 200 (not a replay
// refusal, not a second binding update).
func TestUDPRetransmissionsGetTheSameAnswer(t *testing.T) {
	s := startServer(t, testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"}))
	p := newPhone(t, s.Listeners()[0])

	first := p.register("z9hG4bK-1", 1, "")
	p.send(first)
	challenge := p.read()
	if !strings.HasPrefix(challenge, "SIP/2.0 401") {
		t.Fatalf("first answer %q", challenge)
	}
	p.send(first)
	if again := p.read(); again != challenge {
		t.Fatalf("retransmission answered differently:\n%s\n%s", challenge, again)
	}
	if !strings.Contains(header(challenge, "Via"), "rport=") || !strings.Contains(header(challenge, "Via"), "received=127.0.0.1") {
		t.Errorf("Via without rport/received (RFC 3581): %s", header(challenge, "Via"))
	}

	second := p.register("z9hG4bK-2", 2, authorization(t, challenge))
	p.send(second)
	ok := p.read()
	if !strings.HasPrefix(ok, "SIP/2.0 200") {
		t.Fatalf("authenticated answer %q", ok)
	}
	p.send(second)
	if again := p.read(); again != ok {
		t.Fatalf("retransmitted REGISTER answered differently:\n%s\n%s", ok, again)
	}
	if st := s.Registrar().Stats(); st.Registered != 1 || st.Challenges != 1 {
		t.Fatalf("retransmissions were processed again: %+v", st)
	}
}

// Datagrams that are not SIP are dropped without an answer; the socket
// keeps serving.
func TestUDPGarbageIsDropped(t *testing.T) {
	s := startServer(t, testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"}))
	p := newPhone(t, s.Listeners()[0])
	for _, g := range []string{"\x00\x01\x02", "\r\n\r\n", "hello world", "lowercase sip:x SIP/2.0\r\n\r\n"} {
		p.send(g)
	}
	p.send("OPTIONS sip:" + realm + " SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK-o\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:b@c>\r\nCall-ID: o1\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n")
	res := p.read() // the first (and only) answer is the OPTIONS one
	if !strings.HasPrefix(res, "SIP/2.0 200") || !strings.Contains(header(res, "Allow"), "REGISTER") {
		t.Fatalf("OPTIONS answer %q", res)
	}
	if s.Dropped() != 4 {
		t.Fatalf("dropped %d datagrams, want 4", s.Dropped())
	}
}

// Reconfigure keeps an unchanged listener's socket, binds a new one, closes
// a removed one, and leaves everything as it was when a bind fails.
func TestReconfigureListeners(t *testing.T) {
	keep := Listen{Transport: "udp", Addr: "127.0.0.1:0"}
	s := startServer(t, testConfig(keep, Listen{Transport: "tcp", Addr: "127.0.0.1:0"}))
	before := s.Listeners()
	kept := s.listeners[keep].Bound

	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	bad := testConfig(keep, Listen{Transport: "udp", Addr: busy.LocalAddr().String()})
	if err := s.Reconfigure(t.Context(), bad); err == nil || !strings.Contains(err.Error(), busy.LocalAddr().String()) {
		t.Fatalf("binding a busy port: %v", err)
	}
	if got := s.Listeners(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("a failed reconfigure changed listeners: %v -> %v", before, got)
	}

	if err := s.Reconfigure(t.Context(), testConfig(keep, Listen{Transport: "udp", Addr: "127.0.0.2:0"})); err != nil {
		t.Fatal(err)
	}
	after := s.Listeners()
	if len(after) != 2 || s.listeners[keep].Bound != kept || strings.HasPrefix(after[0], "tcp") || !bytes.Contains([]byte(strings.Join(after, " ")), []byte("127.0.0.2")) {
		t.Fatalf("after reconfigure: %v (kept %s)", after, kept)
	}
	// The kept socket still answers.
	p := newPhone(t, kept)
	p.send("OPTIONS sip:" + realm + " SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK-k\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:b@c>\r\nCall-ID: k1\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n")
	if res := p.read(); !strings.HasPrefix(res, "SIP/2.0 200") {
		t.Fatalf("kept listener: %q", res)
	}
}

// A CANCEL matching no INVITE transaction gets 481 (RFC 3261 §9.2), and so
// does a PRACK outside any ringing call (RFC 3262 §3). Neither is 405:
// both are methods the box knows.
func TestStrayCancelAndPrack(t *testing.T) {
	s := startServer(t, testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"}))
	p := newPhone(t, s.Listeners()[0])
	port := p.conn.LocalAddr().(*net.UDPAddr).Port
	for _, m := range []string{"CANCEL", "PRACK"} {
		p.send(fmt.Sprintf("%s sip:1002@%s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-%s;rport\r\nMax-Forwards: 70\r\n"+
			"From: <sip:1001@%s>;tag=s1\r\nTo: <sip:1002@%s>\r\nCall-ID: stray-%s\r\nCSeq: 1 %s\r\nContent-Length: 0\r\n\r\n",
			m, realm, port, m, realm, realm, m, m))
		if res := p.read(); !strings.HasPrefix(res, "SIP/2.0 481") {
			t.Errorf("stray %s answered %q, want 481", m, strings.SplitN(res, "\r\n", 2)[0])
		}
	}
}
