package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/media/sdprewrite"
)

// Loopback addresses of the tests: the box faces leg A on boxA and leg B
// on boxB; the phones live on their own addresses (all of 127/8 is local).
var (
	boxA   = netip.MustParseAddr("127.0.0.2")
	boxB   = netip.MustParseAddr("127.0.0.3")
	phoneA = netip.MustParseAddr("127.0.0.4")
	phoneB = netip.MustParseAddr("127.0.0.5")
)

// testPorts is a range only these tests use; busy ports are skipped.
const testPortMin, testPortMax = 41000, 48999

// newRelay starts a relay with cfg (test range when unset) and stops it
// at the end of the test, checking that every port was released.
func newRelay(t testing.TB, cfg Config) *Relay {
	t.Helper()
	if cfg.PortMin == 0 {
		cfg.PortMin, cfg.PortMax = testPortMin, testPortMax
	}
	r, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if n := r.PortsInUse(); n != 0 {
			t.Errorf("%d ports still in use after Run returned", n)
		}
	})
	return r
}

// phone is a tiny RTP endpoint: an RTP and an RTCP socket on port 0.
type phone struct {
	t         testing.TB
	rtp, rtcp *net.UDPConn
	ssrc      uint32
	seq       uint16
	ts        uint32
}

func newPhone(t testing.TB, addr netip.Addr) *phone {
	t.Helper()
	// RTCP must be RTP + 1 when no a=rtcp is sent; bind RTP on port 0
	// and try the next port for RTCP, retrying on a collision.
	for range 50 {
		rtp, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err != nil {
			t.Fatal(err)
		}
		port := rtp.LocalAddr().(*net.UDPAddr).Port
		if port%2 == 1 || port == 65535 {
			rtp.Close()
			continue
		}
		rtcp, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(port+1))))
		if err != nil {
			rtp.Close()
			continue
		}
		p := &phone{t: t, rtp: rtp, rtcp: rtcp, ssrc: 0x1000 + uint32(port)}
		t.Cleanup(func() { rtp.Close(); rtcp.Close() })
		return p
	}
	t.Fatal("no even port pair for a test phone")
	return nil
}

func (p *phone) addr() netip.AddrPort { return p.rtp.LocalAddr().(*net.UDPAddr).AddrPort() }

// sdp returns the phone's SDP with the given formats ("0 PCMU", "101
// telephone-event") and extra attribute lines.
func (p *phone) sdp(version int, formats []string, extra ...string) []byte {
	a := p.addr()
	var pts []string
	var lines []string
	for _, f := range formats {
		pt, name, _ := strings.Cut(f, " ")
		pts = append(pts, pt)
		lines = append(lines, fmt.Sprintf("a=rtpmap:%s %s/8000", pt, name))
	}
	at := "IP4"
	if a.Addr().Is6() {
		at = "IP6"
	}
	s := fmt.Sprintf("v=0\r\no=phone 1 %d IN %s %s\r\ns=-\r\nc=IN %s %s\r\nt=0 0\r\nm=audio %d RTP/AVP %s\r\n",
		version, at, a.Addr(), at, a.Addr(), a.Port(), strings.Join(pts, " "))
	for _, l := range append(lines, extra...) {
		s += l + "\r\n"
	}
	return []byte(s)
}

// send sends one RTP packet with payload type pt to dst.
func (p *phone) send(dst netip.AddrPort, pt uint8, payload []byte) {
	p.t.Helper()
	if _, err := p.rtp.WriteToUDPAddrPort(p.packet(pt, payload), dst); err != nil {
		p.t.Fatalf("send: %v", err)
	}
}

// packet builds the phone's next RTP packet. Not safe for concurrent use.
func (p *phone) packet(pt uint8, payload []byte) []byte {
	b := make([]byte, 12+len(payload))
	b[0] = 0x80
	b[1] = pt
	binary.BigEndian.PutUint16(b[2:], p.seq)
	binary.BigEndian.PutUint32(b[4:], p.ts)
	binary.BigEndian.PutUint32(b[8:], p.ssrc)
	copy(b[12:], payload)
	p.seq++
	p.ts += uint32(len(payload))
	return b
}

type rtpPacket struct {
	from    netip.AddrPort
	marker  bool
	pt      uint8
	seq     uint16
	ts      uint32
	ssrc    uint32
	payload []byte
}

// recv waits (bounded) for the next RTP packet.
func (p *phone) recv() rtpPacket {
	p.t.Helper()
	pkt, err := p.tryRecv(5 * time.Second)
	if err != nil {
		p.t.Fatalf("phone %v: no RTP: %v", p.addr(), err)
	}
	return pkt
}

func (p *phone) tryRecv(d time.Duration) (rtpPacket, error) {
	b := make([]byte, 2048)
	_ = p.rtp.SetReadDeadline(time.Now().Add(d))
	n, from, err := p.rtp.ReadFromUDPAddrPort(b)
	if err != nil {
		return rtpPacket{}, err
	}
	if n < 12 {
		return rtpPacket{}, errors.New("short packet")
	}
	return rtpPacket{from: from, marker: b[1]&0x80 != 0, pt: b[1] & 0x7F, seq: binary.BigEndian.Uint16(b[2:]),
		ts: binary.BigEndian.Uint32(b[4:]), ssrc: binary.BigEndian.Uint32(b[8:]), payload: append([]byte(nil), b[12:n]...)}, nil
}

// mediaOf parses the audio address and codecs of an SDP the relay wrote.
func mediaOf(t testing.TB, sdp []byte) sdprewrite.Media {
	t.Helper()
	s, err := sdprewrite.Parse(sdp)
	if err != nil {
		t.Fatalf("relay wrote bad SDP: %v\n%s", err, sdp)
	}
	return s.Audio
}

func addrOf(m sdprewrite.Media) netip.AddrPort { return netip.AddrPortFrom(m.Addr, uint16(m.Port)) }

// call sets up a session between pa (offerer, leg A) and pb with the
// given formats and returns the session and the box's addresses facing
// each leg (where each phone sends).
func call(t testing.TB, r *Relay, pa, pb *phone, offer, answer []string) (s *Session, toBoxA, toBoxB netip.AddrPort) {
	t.Helper()
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	toB, err := s.Offer(A, pa.sdp(1, offer))
	if err != nil {
		t.Fatal(err)
	}
	toA, err := s.Answer(B, pb.sdp(1, answer))
	if err != nil {
		t.Fatal(err)
	}
	return s, addrOf(mediaOf(t, toA)), addrOf(mediaOf(t, toB))
}

// waitFor polls cond (a counter the relay updates when it has handled a
// packet) until it holds or 5 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// pacer sends RTP from p to dst every 20 ms until stopped.
func pacer(t testing.TB, p *phone, dst netip.AddrPort, pt uint8) (stop func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		payload := make([]byte, 160)
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_, _ = p.rtp.WriteToUDPAddrPort(p.packet(pt, payload), dst)
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done) }); wg.Wait() }
}
