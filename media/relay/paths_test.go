package relay

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// pathCase is one kind of packet through a forwarder's per-packet work
// (no socket I/O): the allocation test and BenchmarkForwardPath share it.
type pathCase struct {
	name string
	// setup returns the forwarder, the packet template, its source, and
	// rtcp true when the packet goes through the RTCP path.
	setup func(t testing.TB) (f *forwarder, pkt []byte, src netip.AddrPort, isRTCP bool)
}

// marshalRTP builds an RTP packet with pion (an encoder independent of
// the relay's writer).
func marshalRTP(t testing.TB, h rtp.Header, payload []byte) []byte {
	t.Helper()
	h.Version = 2
	b, err := (&rtp.Packet{Header: h, Payload: payload}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rtcpSR is a sender report from ssrc with one reception block.
func rtcpSR(t testing.TB, ssrc, rtpTime uint32) []byte {
	t.Helper()
	b, err := (&rtcp.SenderReport{SSRC: ssrc, NTPTime: 1 << 40, RTPTime: rtpTime, PacketCount: 10, OctetCount: 1600,
		Reports: []rtcp.ReceptionReport{{SSRC: 0x4242, LastSequenceNumber: 7}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// remapped sends leg A's forwarder one packet from pa's SSRC and one from
// another SSRC, so that from then on every packet of the second source is
// rewritten (sequence number, timestamp, SSRC) and its RTCP patched.
func remapped(t testing.TB, f *forwarder, pa *phone) (newSSRC uint32) {
	t.Helper()
	newSSRC = pa.ssrc + 1
	for i, ssrc := range []uint32{pa.ssrc, newSSRC} {
		p := marshalRTP(t, rtp.Header{SequenceNumber: uint16(1000 * i), Timestamp: uint32(99999 * i), SSRC: ssrc}, make([]byte, 160))
		p = append(make([]byte, 0, maxPacket+srtpSlack), p...)
		if _, _, _, ok := f.rtp(p, pa.addr(), int64(i)*20e6); !ok {
			t.Fatal("setup packet dropped")
		}
	}
	return newSSRC
}

var pathCases = []pathCase{
	{"rewrite", func(t testing.TB) (*forwarder, []byte, netip.AddrPort, bool) {
		r := newRelay(t, Config{})
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"8 PCMA"})
		f := &s.fwd[A]
		ssrc := remapped(t, f, pa)
		return f, marshalRTP(t, rtp.Header{SSRC: ssrc}, make([]byte, 160)), pa.addr(), false
	}},
	{"csrc-ext", func(t testing.TB) (*forwarder, []byte, netip.AddrPort, bool) {
		r := newRelay(t, Config{})
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"8 PCMA"})
		h := rtp.Header{SSRC: pa.ssrc, CSRC: []uint32{7, 8}}
		if err := h.SetExtension(1, []byte{0x30}); err != nil { // RFC 6464 audio level, one-byte form
			t.Fatal(err)
		}
		if err := h.SetExtension(3, []byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		return &s.fwd[A], marshalRTP(t, h, make([]byte, 160)), pa.addr(), false
	}},
	{"rtcp-sr", func(t testing.TB) (*forwarder, []byte, netip.AddrPort, bool) {
		r := newRelay(t, Config{})
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
		f := &s.fwd[A]
		ssrc := remapped(t, f, pa)
		return f, rtcpSR(t, ssrc, 123456), pa.rtcp.LocalAddr().(interface{ AddrPort() netip.AddrPort }).AddrPort(), true
	}},
}

// forwardOne copies pkt into buf and forwards it as packet i (RTP:
// sequence number i, timestamp i·160).
func forwardOne(f *forwarder, pkt, buf []byte, src netip.AddrPort, isRTCP bool, i int) bool {
	buf = buf[:len(pkt)]
	copy(buf, pkt)
	if isRTCP {
		_, _, _, ok := f.rtcpPacket(buf, src)
		return ok
	}
	binary.BigEndian.PutUint16(buf[2:], uint16(i))
	binary.BigEndian.PutUint32(buf[4:], uint32(i)*160)
	_, _, _, ok := f.rtp(buf, src, int64(i)*20e6)
	return ok
}

// BenchmarkForwardPath is the relay's per-packet work (no send) for the
// packets BenchmarkForwardNoSend does not cover: a source whose SSRC,
// sequence numbers and timestamps are rewritten (rewrite), a packet with
// CSRCs and an RFC 8285 header extension (csrc-ext), and an RTCP sender
// report whose sender SSRC and RTP timestamp follow the rewrite (rtcp-sr).
// All µ-law → A-law except rtcp-sr. It must report 0 allocs/op.
func BenchmarkForwardPath(b *testing.B) {
	for _, tc := range pathCases {
		b.Run(tc.name, func(b *testing.B) {
			f, pkt, src, isRTCP := tc.setup(b)
			buf := make([]byte, len(pkt), maxPacket+srtpSlack)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !forwardOne(f, pkt, buf, src, isRTCP, i) {
					b.Fatal("dropped")
				}
				i++
			}
		})
	}
}

// TestForwardPathsDoNotAllocate: no packet kind of BenchmarkForwardPath
// allocates once its reader has seen the first one (pion/rtp sizes the
// reused header's CSRC and extension slices on the first packet that has
// them).
func TestForwardPathsDoNotAllocate(t *testing.T) {
	for _, tc := range pathCases {
		t.Run(tc.name, func(t *testing.T) {
			f, pkt, src, isRTCP := tc.setup(t)
			buf := make([]byte, len(pkt), maxPacket+srtpSlack)
			i := 0
			if !forwardOne(f, pkt, buf, src, isRTCP, i) {
				t.Fatal("dropped")
			}
			n := testing.AllocsPerRun(200, func() {
				i++
				if !forwardOne(f, pkt, buf, src, isRTCP, i) {
					t.Fatal("dropped")
				}
			})
			if n != 0 {
				t.Errorf("%v allocations per packet", n)
			}
		})
	}
}
