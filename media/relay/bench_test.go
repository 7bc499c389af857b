package relay

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/outpost/outpost/media/sdprewrite"
)

// BenchmarkForwardRTP measures the per-packet work of the relay after the
// read: latching check, statistics, SSRC/sequence bookkeeping, payload
// type mapping (and G.711 transcoding in the /transcode case), and the
// send from the box's socket facing the other leg. It must report 0
// allocs/op.
func BenchmarkForwardRTP(b *testing.B) {
	for _, tc := range []struct {
		name          string
		offer, answer []string
		pt            uint8
		wantOutPT     uint8
	}{
		{"passthrough", []string{"0 PCMU"}, []string{"0 PCMU"}, 0, 0},
		{"transcode", []string{"0 PCMU"}, []string{"8 PCMA"}, 0, 8},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := newRelay(b, Config{})
			pa, pb := newPhone(b, phoneA), newPhone(b, phoneB)
			_ = pb.rtp.SetReadBuffer(64 << 10) // B's socket overflows quietly; only the send is measured
			s, _, _ := call(b, r, pa, pb, tc.offer, tc.answer)
			f := &s.fwd[A]
			pkt := pa.packet(tc.pt, make([]byte, 160))
			buf := make([]byte, len(pkt), maxPacket+srtpSlack)
			src := pa.addr()
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt)))
			i := 0
			for b.Loop() {
				copy(buf, pkt)
				binary.BigEndian.PutUint16(buf[2:], uint16(i))
				binary.BigEndian.PutUint32(buf[4:], uint32(i)*160)
				out, to, dst, ok := f.rtp(buf, src, int64(i)*20e6)
				if !ok {
					b.Fatal("packet dropped")
				}
				if _, err := to.rtp.WriteToUDPAddrPort(out, dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if buf[1]&0x7F != tc.wantOutPT {
				b.Fatalf("out PT %d", buf[1]&0x7F)
			}
		})
	}
}

// BenchmarkForwardNoSend is the relay's own per-packet CPU, without the
// kernel's send.
func BenchmarkForwardNoSend(b *testing.B) {
	r := newRelay(b, Config{})
	pa, pb := newPhone(b, phoneA), newPhone(b, phoneB)
	s, _, _ := call(b, r, pa, pb, []string{"0 PCMU"}, []string{"8 PCMA"})
	f := &s.fwd[A]
	pkt := pa.packet(0, make([]byte, 160))
	src := pa.addr()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		binary.BigEndian.PutUint16(pkt[2:], uint16(i))
		pkt[1] = 0
		if _, _, _, ok := f.rtp(pkt, src, int64(i)*20e6); !ok {
			b.Fatal("dropped")
		}
		i++
	}
}

func TestForwardDoesNotAllocate(t *testing.T) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"8 PCMA"})
	f := &s.fwd[A]
	pkt := pa.packet(0, make([]byte, 160))
	src := pa.addr()
	i := 0
	n := testing.AllocsPerRun(200, func() {
		binary.BigEndian.PutUint16(pkt[2:], uint16(i))
		pkt[1] = 0
		if _, _, _, ok := f.rtp(pkt, src, int64(i)*20e6); !ok {
			t.Fatal("dropped")
		}
		i++
	})
	if n != 0 {
		t.Errorf("%v allocations per forwarded packet", n)
	}
}

// srtpLoop sets up plain phone A and SRTP phone B with suite (nil: both
// plain), both PCMU, B keyed with the box's own key towards B so that
// what leg A's forwarder encrypts, leg B's forwarder can decrypt: one
// round trip is one encryption and one authentication plus decryption.
func srtpLoop(t testing.TB, suite string) (fa, fb *forwarder, pa, pb *phone) {
	t.Helper()
	r := newRelay(t, Config{})
	pa, pb = newPhone(t, phoneA), newPhone(t, phoneB)
	pol := SRTPRequire
	if suite == "" {
		pol = SRTPOff
	}
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB, SRTP: [2]SRTPPolicy{SRTPOff, pol}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	toB, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	answer := pb.sdp(1, []string{"0 PCMU"})
	if suite != "" {
		var own sdprewrite.Crypto
		for _, c := range mediaOf(t, toB).Crypto {
			if c.Suite == suite {
				own = c
			}
		}
		answer = savp(answer, own)
	}
	if _, err := s.Answer(B, answer); err != nil {
		t.Fatal(err)
	}
	return &s.fwd[A], &s.fwd[B], pa, pb
}

// roundTrip forwards packet i from A to B (encrypting it when B is SRTP)
// and the result from B back to A (decrypting it), in buf.
func roundTrip(fa, fb *forwarder, pkt, buf []byte, srcA, srcB netip.AddrPort, i int) bool {
	buf = buf[:len(pkt)]
	copy(buf, pkt)
	binary.BigEndian.PutUint16(buf[2:], uint16(i))
	binary.BigEndian.PutUint32(buf[4:], uint32(i)*160)
	out, _, _, ok := fa.rtp(buf, srcA, int64(i)*20e6)
	if !ok {
		return false
	}
	_, _, _, ok = fb.rtp(out, srcB, int64(i)*20e6)
	return ok
}

// BenchmarkForwardSRTP is BenchmarkForwardNoSend's relay work for a
// packet A → B and back B → A, with leg B plain ("plain") or SRTP with
// each suite: the difference is the cost of one SRTP encryption plus one
// authentication and decryption (pion/srtp v3), in place. 0 allocs/op.
func BenchmarkForwardSRTP(b *testing.B) {
	for _, suite := range append([]string{""}, sdprewrite.Suites...) {
		name := suite
		if name == "" {
			name = "plain"
		}
		b.Run(name, func(b *testing.B) {
			fa, fb, pa, pb := srtpLoop(b, suite)
			pkt := pa.packet(0, make([]byte, 160))
			buf := make([]byte, len(pkt), maxPacket+srtpSlack)
			srcA, srcB := pa.addr(), pb.addr()
			b.ReportAllocs()
			b.SetBytes(int64(2 * len(pkt)))
			i := 0
			for b.Loop() {
				if !roundTrip(fa, fb, pkt, buf, srcA, srcB, i) {
					b.Fatal("dropped")
				}
				i++
			}
		})
	}
}

// BenchmarkForwardSRTPSend is BenchmarkForwardRTP/passthrough with leg B
// SRTP: the relay work, the encryption and the send over loopback.
func BenchmarkForwardSRTPSend(b *testing.B) {
	for _, suite := range sdprewrite.Suites {
		b.Run(suite, func(b *testing.B) {
			fa, _, pa, pb := srtpLoop(b, suite)
			_ = pb.rtp.SetReadBuffer(64 << 10)
			pkt := pa.packet(0, make([]byte, 160))
			buf := make([]byte, len(pkt), maxPacket+srtpSlack)
			src := pa.addr()
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt)))
			i := 0
			for b.Loop() {
				buf = buf[:len(pkt)]
				copy(buf, pkt)
				binary.BigEndian.PutUint16(buf[2:], uint16(i))
				binary.BigEndian.PutUint32(buf[4:], uint32(i)*160)
				out, to, dst, ok := fa.rtp(buf, src, int64(i)*20e6)
				if !ok {
					b.Fatal("packet dropped")
				}
				if _, err := to.rtp.WriteToUDPAddrPort(out, dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// TestForwardSRTPDoesNotAllocate: encrypting and decrypting in place in
// the forwarding path allocates nothing, for every suite.
func TestForwardSRTPDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		// pion/srtp takes its keystream buffer from a sync.Pool, which the
		// race detector empties at random: allocations then vary.
		t.Skip("allocation count is meaningless under -race (sync.Pool)")
	}
	for _, suite := range sdprewrite.Suites {
		fa, fb, pa, pb := srtpLoop(t, suite)
		pkt := pa.packet(0, make([]byte, 160))
		buf := make([]byte, len(pkt), maxPacket+srtpSlack)
		srcA, srcB := pa.addr(), pb.addr()
		i := 0
		for range 10 { // first packets create pion's per-SSRC state
			if !roundTrip(fa, fb, pkt, buf, srcA, srcB, i) {
				t.Fatalf("%s: dropped", suite)
			}
			i++
		}
		n := testing.AllocsPerRun(200, func() {
			if !roundTrip(fa, fb, pkt, buf, srcA, srcB, i) {
				t.Fatalf("%s: dropped", suite)
			}
			i++
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per packet round trip", suite, n)
		}
	}
}
