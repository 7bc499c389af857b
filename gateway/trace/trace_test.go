package trace_test

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/trace"
	"github.com/outpost/outpost/gateway/trace/tracetest"
)

// sipMsg builds a SIP message from lines (CRLF-terminated, with an empty
// line after the headers, then body).
func sipMsg(body string, lines ...string) []byte {
	s := strings.Join(lines, "\r\n") + "\r\n"
	if body != "" {
		s += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	return []byte(s + "\r\n" + body)
}

var register = sipMsg("",
	"REGISTER sip:branch.example.com SIP/2.0",
	"Via: SIP/2.0/UDP 10.0.0.7:5062;branch=z9hG4bK-1",
	`From: "Alice" <sip:1001@branch.example.com>;tag=a1`,
	"To: <sip:1001@branch.example.com>",
	"Call-ID: reg-1@10.0.0.7",
	"CSeq: 1 REGISTER",
	"Content-Length: 0")

var ok200 = sipMsg("",
	"SIP/2.0 200 OK",
	"Via: SIP/2.0/UDP 10.0.0.7:5062;branch=z9hG4bK-1",
	"f: <sip:1001@branch.example.com>;tag=a1",
	"t: <sip:1001@branch.example.com>;tag=b2",
	"i: reg-1@10.0.0.7",
	"CSeq: 1 REGISTER",
	"Content-Length: 0")

var invite = sipMsg("v=0\r\no=- 1 1 IN IP4 10.0.0.7\r\ns=-\r\n",
	"INVITE sip:2002@branch.example.com SIP/2.0",
	"Via: SIP/2.0/TCP 10.0.0.7:5062;branch=z9hG4bK-2",
	"From: <sip:1001@branch.example.com>;tag=x",
	"To: <sip:2002@branch.example.com>",
	"Call-ID: call-2",
	"CSeq: 1 INVITE")

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		filter string
		msg    []byte
		want   bool
	}{
		{"", register, true},
		{"user=1001", register, true},
		{"user=1001", ok200, true},  // compact From/To
		{"user=2002", invite, true}, // the Request-URI and To
		{"user=100", register, false},
		{"call-id=reg-1@10.0.0.7", ok200, true}, // compact Call-ID
		{"call-id=reg-1", register, false},
		{"method=register", ok200, true}, // a response by its CSeq
		{"method=INVITE", register, false},
		{"method=INVITE", invite, true},
	} {
		f, err := trace.ParseFilter(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Match(tc.msg); got != tc.want {
			t.Errorf("%q on %q: %v, want %v", tc.filter, bytes.SplitN(tc.msg, []byte("\r\n"), 2)[0], got, tc.want)
		}
	}
	for _, bad := range []string{"user", "user=", "from=1", "=x"} {
		if _, err := trace.ParseFilter(bad); err == nil {
			t.Errorf("ParseFilter(%q) accepted", bad)
		}
	}
}

// udpPair is a traced socket and a peer on loopback.
func udpPair(t *testing.T, tap *trace.Tap) (traced, peer net.PacketConn) {
	t.Helper()
	a, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return trace.WrapPacketConn(a, tap), b
}

func recv(t *testing.T, s *trace.Sink) trace.Message {
	t.Helper()
	select {
	case m := <-s.C():
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message traced")
	}
	return trace.Message{}
}

func TestUDPBothWays(t *testing.T) {
	tap := new(trace.Tap)
	pc, peer := udpPair(t, tap)
	buf := make([]byte, 2048)

	// Off: nothing is kept.
	peer.WriteTo(register, pc.LocalAddr())
	pc.ReadFrom(buf)
	if tap.On() {
		t.Fatal("a Tap without consumers is on")
	}

	s := tap.Attach(trace.Filter{}, 8)
	peer.WriteTo(register, pc.LocalAddr())
	if _, _, err := pc.ReadFrom(buf); err != nil {
		t.Fatal(err)
	}
	pc.WriteTo(ok200, peer.LocalAddr())
	pc.WriteTo([]byte("\r\n\r\n"), peer.LocalAddr()) // a keep-alive is no message
	in, out := recv(t, s), recv(t, s)
	local, remote := pc.LocalAddr().(*net.UDPAddr).AddrPort(), peer.LocalAddr().(*net.UDPAddr).AddrPort()
	if in.Dir != trace.In || in.Transport != "udp" || in.Local != local || in.Remote != remote || !bytes.Equal(in.Data, register) {
		t.Errorf("in: %+v", in)
	}
	if out.Dir != trace.Out || out.Src() != local || out.Dst() != remote || !bytes.Equal(out.Data, ok200) {
		t.Errorf("out: %+v", out)
	}
	select {
	case m := <-s.C():
		t.Errorf("unexpected message %q", m.Data)
	default:
	}
	tap.Detach(s)
	if tap.On() {
		t.Fatal("on after the last consumer left")
	}
}

func TestFullQueueDropsAndCounts(t *testing.T) {
	tap := new(trace.Tap)
	s := tap.Attach(trace.Filter{}, 2)
	a := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5060}
	for range 5 {
		tap.Emit(trace.In, "udp", a, a, register) // never blocks
	}
	if got := s.Dropped(); got != 3 {
		t.Fatalf("dropped %d, want 3", got)
	}
}

// TestTCPStream: reads in arbitrary pieces become whole messages; tracing
// turned on in the middle of a message starts at the next one.
func TestTCPStream(t *testing.T) {
	tap := new(trace.Tap)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := trace.WrapConn(raw, tap)
	defer c.Close()
	buf := make([]byte, 4096)
	readAll := func(n int) {
		for got := 0; got < n; {
			k, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got += k
		}
	}
	// Half a message while off.
	cli.Write(invite[:40])
	readAll(40)
	s := tap.Attach(trace.Filter{}, 8)
	// Its rest, then a keep-alive and two messages in odd pieces.
	stream := append(append(append([]byte(nil), invite[40:]...), "\r\n\r\n"...), invite...)
	stream = append(stream, register...)
	for i := 0; i < len(stream); i += 7 {
		cli.Write(stream[i:min(i+7, len(stream))])
		readAll(min(7, len(stream)-i))
	}
	c.Write(ok200)
	first, second, out := recv(t, s), recv(t, s), recv(t, s)
	if !bytes.Equal(first.Data, invite) || first.Transport != "tcp" || first.Dir != trace.In {
		t.Errorf("first: %q", first.Data)
	}
	if !bytes.Equal(second.Data, register) {
		t.Errorf("second: %q", second.Data)
	}
	if out.Dir != trace.Out || !bytes.Equal(out.Data, ok200) || out.Remote != cli.LocalAddr().(*net.TCPAddr).AddrPort() {
		t.Errorf("out: %+v", out)
	}
}

// TestPcapReadBack writes UDP and TCP messages, IPv4 and IPv6, and reads
// them back with an independent decoder.
func TestPcapReadBack(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewPcapWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	box4, phone4 := netip.MustParseAddrPort("192.0.2.1:5060"), netip.MustParseAddrPort("192.0.2.7:5062")
	box6, phone6 := netip.MustParseAddrPort("[2001:db8::1]:5060"), netip.MustParseAddrPort("[2001:db8::7]:40000")
	now := time.Unix(1764410000, 123456000)
	msgs := []trace.Message{
		{Time: now, Dir: trace.In, Transport: "udp", Local: box4, Remote: phone4, Data: register},
		{Time: now, Dir: trace.Out, Transport: "udp", Local: box4, Remote: phone4, Data: ok200},
		{Time: now, Dir: trace.In, Transport: "tcp", Local: box6, Remote: phone6, Data: invite},
		{Time: now, Dir: trace.In, Transport: "tcp", Local: box6, Remote: phone6, Data: invite},
		{Time: now, Dir: trace.Out, Transport: "udp", Local: box6, Remote: phone6, Data: ok200},
	}
	for i := range msgs {
		if err := w.Write(&msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := tracetest.ReadPcap(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != len(msgs) {
		t.Fatalf("%d packets, want %d", len(ps), len(msgs))
	}
	for i, p := range ps {
		m := msgs[i]
		if p.Proto != m.Transport || p.Src != m.Src() || p.Dst != m.Dst() || !bytes.Equal(p.Payload, m.Data) || !p.Time.Equal(now) {
			t.Errorf("packet %d: %s %s → %s at %s, %q", i, p.Proto, p.Src, p.Dst, p.Time, p.Payload)
		}
	}
	if ps[2].Seq != 1 || ps[3].Seq != 1+uint32(len(invite)) {
		t.Errorf("TCP sequence numbers %d, %d", ps[2].Seq, ps[3].Seq)
	}
}

func TestHEPEncoding(t *testing.T) {
	m := trace.Message{Time: time.Unix(1764410000, 654321000), Dir: trace.Out, Transport: "udp",
		Local: netip.MustParseAddrPort("192.0.2.1:5060"), Remote: netip.MustParseAddrPort("192.0.2.7:5062"), Data: ok200}
	h, err := tracetest.DecodeHEP(trace.EncodeHEP(&m, 2001, "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	src, dst := h.Addrs()
	if h.Uint(1) != 2 || h.Uint(2) != 17 || src != m.Local || dst != m.Remote || h.Uint(9) != 1764410000 || h.Uint(10) != 654321 ||
		h.Uint(11) != 1 || h.Uint(12) != 2001 || string(h[14]) != "s3cret" || !bytes.Equal(h[15], ok200) || string(h[0x11]) != "reg-1@10.0.0.7" {
		t.Fatalf("HEP chunks %v", h)
	}
	m6 := m
	m6.Dir, m6.Transport = trace.In, "tcp"
	m6.Local, m6.Remote = netip.MustParseAddrPort("[2001:db8::1]:5060"), netip.MustParseAddrPort("[2001:db8::7]:40000")
	h, err = tracetest.DecodeHEP(trace.EncodeHEP(&m6, 0, ""))
	if err != nil {
		t.Fatal(err)
	}
	src, dst = h.Addrs()
	if h.Uint(1) != 10 || h.Uint(2) != 6 || src != m6.Remote || dst != m6.Local || h[14] != nil {
		t.Fatalf("IPv6 HEP chunks %v", h)
	}
}

// TestExporter sends through a real socket to a HEP receiver, over UDP and
// over TCP.
func TestExporter(t *testing.T) {
	srv, err := tracetest.NewHEPServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, server := range []string{"udp:" + srv.UDP.LocalAddr().String(), "tcp:" + srv.TCP.Addr().String()} {
		tap := new(trace.Tap)
		e, err := trace.NewExporter(trace.HEPConfig{Server: server, NodeID: 7, Password: "pw"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.Start(tap)
		pc, peer := udpPair(t, tap)
		pc.WriteTo(register, peer.LocalAddr())
		select {
		case h := <-srv.C:
			src, dst := h.Addrs()
			if src != pc.LocalAddr().(*net.UDPAddr).AddrPort() || dst != peer.LocalAddr().(*net.UDPAddr).AddrPort() ||
				h.Uint(12) != 7 || string(h[14]) != "pw" || string(h[0x11]) != "reg-1@10.0.0.7" || !bytes.Equal(h[15], register) {
				t.Errorf("%s: %v", server, h)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing received", server)
		}
		e.Close()
		if tap.On() {
			t.Errorf("%s: tap on after Close", server)
		}
		if sent, dropped := e.Stats(); sent != 1 || dropped != 0 {
			t.Errorf("%s: sent %d, dropped %d", server, sent, dropped)
		}
	}
	if errs := srv.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestParseHEPServer(t *testing.T) {
	for _, ok := range []string{"udp:10.0.0.1:9060", "tcp:homer.example.com:9061", "udp:[2001:db8::1]:9060"} {
		if _, _, err := trace.ParseHEPServer(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "10.0.0.1:9060", "tls:h:1", "udp:h", "udp::9060", "udp:h:0", "udp:h:x"} {
		if _, _, err := trace.ParseHEPServer(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
