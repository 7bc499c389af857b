package relay

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/outpost/outpost/media/g711"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// pathCase is one kind of packet through the relay's per-packet work (no
// socket I/O): TestForwardPaths, TestForwardPathsDoNotAllocate and
// BenchmarkForwardPath share it.
type pathCase struct {
	name   string
	isRTCP bool // the packet is RTCP: its sequence number is not set per packet
	// setup returns the packet and the function that forwards it in
	// place (a forwarder's or an endpoint's), and optionally a check of
	// what it made of the packet.
	setup func(t testing.TB) (pkt []byte, forward func(p []byte, i int) ([]byte, bool), check func(t testing.TB, in, out []byte))
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

// unmarshalRTP parses what the relay sent, with a fresh pion packet.
func unmarshalRTP(t testing.TB, b []byte) *rtp.Packet {
	t.Helper()
	var p rtp.Packet
	if err := p.Unmarshal(b); err != nil {
		t.Fatalf("relay sent a packet pion cannot parse: %v (%x)", err, b)
	}
	return &p
}

// remapped sends leg A's forwarder one packet from pa's SSRC and one from
// another SSRC, so that from then on every packet of the second source is
// rewritten (sequence number, timestamp, SSRC) and its RTCP follows. The
// timestamp offset is then 160 - 99999.
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

// ulawToAlaw is payload transcoded as the relay must.
func ulawToAlaw(payload []byte) []byte {
	out := append([]byte(nil), payload...)
	g711.UlawToAlawInPlace(out)
	return out
}

// legA sets up a session µ-law (A) → answer (B) and returns leg A's
// forwarding function.
func legA(t testing.TB, answer string) (*forwarder, *phone, func(p []byte, i int) ([]byte, bool)) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{answer})
	f := &s.fwd[A]
	src := pa.addr()
	return f, pa, func(p []byte, i int) ([]byte, bool) {
		out, _, _, ok := f.rtp(p, src, int64(i)*20e6)
		return out, ok
	}
}

// speech is a payload whose µ-law and A-law codes differ.
var speech = bytes.Repeat([]byte{0x00, 0x7F, 0x80, 0xFF, 0x12}, 32)

var pathCases = []pathCase{
	{name: "rewrite", setup: func(t testing.TB) ([]byte, func([]byte, int) ([]byte, bool), func(testing.TB, []byte, []byte)) {
		f, pa, fwd := legA(t, "8 PCMA")
		ssrc := remapped(t, f, pa)
		return marshalRTP(t, rtp.Header{SSRC: ssrc}, speech), fwd, func(t testing.TB, in, out []byte) {
			got := unmarshalRTP(t, out)
			if got.SSRC != pa.ssrc || got.PayloadType != 8 || got.Marker || !bytes.Equal(got.Payload, ulawToAlaw(speech)) {
				t.Errorf("rewritten packet: SSRC %#x PT %d marker %v; want SSRC %#x PT 8, no marker, payload A-law", got.SSRC, got.PayloadType, got.Marker, pa.ssrc)
			}
		}
	}},
	{name: "csrc-ext", setup: func(t testing.TB) ([]byte, func([]byte, int) ([]byte, bool), func(testing.TB, []byte, []byte)) {
		_, pa, fwd := legA(t, "8 PCMA")
		h := rtp.Header{SSRC: pa.ssrc, CSRC: []uint32{7, 8}, Padding: true, PaddingSize: 4}
		if err := h.SetExtension(1, []byte{0x30}); err != nil { // RFC 6464 audio level, one-byte form
			t.Fatal(err)
		}
		if err := h.SetExtension(3, []byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		pkt := marshalRTP(t, h, speech) // ends in 4 bytes of RTP padding (RFC 3550 §5.1): not payload
		return pkt, fwd, func(t testing.TB, in, out []byte) {
			got := unmarshalRTP(t, out)
			if got.PayloadType != 8 || len(got.CSRC) != 2 || got.CSRC[1] != 8 || !bytes.Equal(got.GetExtension(3), []byte{1, 2, 3}) ||
				!bytes.Equal(got.Payload, ulawToAlaw(speech)) || got.PaddingSize != 4 {
				t.Errorf("PT %d CSRC %v ext3 %x padding %d, payload transcoded %v", got.PayloadType, got.CSRC, got.GetExtension(3), got.PaddingSize, bytes.Equal(got.Payload, ulawToAlaw(speech)))
			}
			hl := len(in) - len(speech) - 4
			if out[0] != in[0] || !bytes.Equal(out[2:hl], in[2:hl]) || !bytes.Equal(out[len(out)-4:], in[len(in)-4:]) {
				t.Errorf("header or padding changed beyond the payload type:\n in %x\nout %x", in[:hl], out[:hl])
			}
		}
	}},
	// An RFC 8285 block with padding after its element (legal, RFC 8285
	// §4.2) and an element after the terminating ID 15: re-encoding it
	// would shrink it; the relay must leave it byte for byte.
	{name: "ext-padding", setup: func(t testing.TB) ([]byte, func([]byte, int) ([]byte, bool), func(testing.TB, []byte, []byte)) {
		_, pa, fwd := legA(t, "8 PCMA")
		hdr := marshalRTP(t, rtp.Header{SSRC: pa.ssrc}, nil)
		hdr[0] |= 0x10
		ext := []byte{0xBE, 0xDE, 0, 3, 0x10, 0xAA, 0, 0, 0, 0, 0, 0, 0xF0, 0x21, 0xBB, 0xCC}
		pkt := append(append(hdr, ext...), speech...)
		return pkt, fwd, func(t testing.TB, in, out []byte) {
			hl := 12 + len(ext)
			if len(out) != len(in) || !bytes.Equal(out[12:hl], in[12:hl]) || out[1] != 8 || !bytes.Equal(out[hl:], ulawToAlaw(speech)) {
				t.Errorf("extension block or payload changed:\n in %x\nout %x", in, out)
			}
		}
	}},
	{name: "rtcp-sr", isRTCP: true, setup: func(t testing.TB) ([]byte, func([]byte, int) ([]byte, bool), func(testing.TB, []byte, []byte)) {
		r := newRelay(t, Config{})
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
		f := &s.fwd[A]
		ssrc := remapped(t, f, pa)
		report := rtcp.ReceptionReport{SSRC: 0x4242, LastSequenceNumber: 7, Jitter: 3}
		compound, err := rtcp.Marshal([]rtcp.Packet{
			&rtcp.SenderReport{SSRC: ssrc, NTPTime: 1 << 40, RTPTime: 123456, PacketCount: 10, OctetCount: 1600, Reports: []rtcp.ReceptionReport{report}},
			&rtcp.ReceiverReport{SSRC: ssrc, Reports: []rtcp.ReceptionReport{report, report}},
			&rtcp.SourceDescription{Chunks: []rtcp.SourceDescriptionChunk{{Source: ssrc, Items: []rtcp.SourceDescriptionItem{{Type: rtcp.SDESCNAME, Text: "a@b"}}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		src := pa.rtcp.LocalAddr().(interface{ AddrPort() netip.AddrPort }).AddrPort()
		return compound, func(p []byte, _ int) ([]byte, bool) {
				out, _, _, ok := f.rtcpPacket(p, src)
				return out, ok
			}, func(t testing.TB, in, out []byte) {
				pkts, err := rtcp.Unmarshal(out)
				if err != nil || len(pkts) != 3 {
					t.Fatalf("relay sent RTCP pion cannot parse: %v", err)
				}
				sr, rr := pkts[0].(*rtcp.SenderReport), pkts[1].(*rtcp.ReceiverReport)
				if sr.SSRC != pa.ssrc || sr.RTPTime != 123456+160-99999 || sr.Reports[0] != report || rr.SSRC != pa.ssrc || rr.Reports[1] != report {
					t.Errorf("SR SSRC %#x RTP time %d, RR SSRC %#x; want %#x %d", sr.SSRC, sr.RTPTime, rr.SSRC, pa.ssrc, 123456+160-99999)
				}
				if n := len(in) - len(pkts[2].(*rtcp.SourceDescription).Chunks[0].Items[0].Text) - 12; !bytes.Equal(out[n:], in[n:]) {
					t.Errorf("SDES changed")
				}
			}
	}},
	// The media server endpoints' path (media/msr): µ-law in, A-law out.
	{name: "video", setup: func(t testing.TB) ([]byte, func([]byte, int) ([]byte, bool), func(testing.TB, []byte, []byte)) {
		f, src := videoLegA(t)
		pkt := marshalRTP(t, rtp.Header{PayloadType: 96, SSRC: 0x7e0, Marker: true}, bytes.Repeat([]byte{0x65, 0x88}, 550))
		fwd := func(p []byte, i int) ([]byte, bool) {
			out, _, _, ok := f.rtp(p, src, int64(i)*33e6)
			return out, ok
		}
		return pkt, fwd, func(t testing.TB, in, out []byte) {
			if !bytes.Equal(in, out) {
				t.Errorf("video packet changed on the way:\n in %x\nout %x", in[:16], out[:16])
			}
		}
	}},
	{name: "endpoint", setup: func(t testing.TB) ([]byte, func([]byte, int) ([]byte, bool), func(testing.TB, []byte, []byte)) {
		r := newRelay(t, Config{Codecs: []string{"PCMU", "PCMA", "telephone-event"}})
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		ea, _, err := r.OpenEndpoint(EndpointConfig{ID: "a", Local: boxA}, pa.sdp(1, []string{"0 PCMU"}))
		if err != nil {
			t.Fatal(err)
		}
		eb, _, err := r.OpenEndpoint(EndpointConfig{ID: "b", Local: boxB}, pb.sdp(1, []string{"8 PCMA"}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ea.Close(); eb.Close() })
		ea.ForwardTo(eb)
		var pkt rtp.Packet
		var lt latch
		src := pa.addr()
		return marshalRTP(t, rtp.Header{SSRC: pa.ssrc}, speech), func(p []byte, _ int) ([]byte, bool) {
				_, _, ok := ea.forwardRTP(&pkt, &lt, p, src)
				return p, ok
			}, func(t testing.TB, _, out []byte) {
				if got := unmarshalRTP(t, out); got.PayloadType != 8 || !bytes.Equal(got.Payload, ulawToAlaw(speech)) {
					t.Errorf("endpoint sent PT %d, payload transcoded %v", got.PayloadType, bytes.Equal(got.Payload, ulawToAlaw(speech)))
				}
			}
	}},
}

// forwardOne copies pkt into buf and forwards it as packet i (RTP:
// sequence number i, timestamp i·160).
func forwardOne(pkt, buf []byte, forward func([]byte, int) ([]byte, bool), isRTCP bool, i int) ([]byte, bool) {
	buf = buf[:len(pkt)]
	copy(buf, pkt)
	if !isRTCP {
		binary.BigEndian.PutUint16(buf[2:], uint16(i))
		binary.BigEndian.PutUint32(buf[4:], uint32(i)*160)
	}
	return forward(buf, i)
}

// TestForwardPaths: what the relay makes of each kind of packet, checked
// by parsing its output with pion.
func TestForwardPaths(t *testing.T) {
	for _, tc := range pathCases {
		t.Run(tc.name, func(t *testing.T) {
			pkt, forward, check := tc.setup(t)
			buf := make([]byte, len(pkt), maxPacket+srtpSlack)
			for i := range 3 {
				out, ok := forwardOne(pkt, buf, forward, tc.isRTCP, i)
				if !ok {
					t.Fatalf("packet %d dropped", i)
				}
				in := append([]byte(nil), pkt...)
				if !tc.isRTCP {
					binary.BigEndian.PutUint16(in[2:], uint16(i))
					binary.BigEndian.PutUint32(in[4:], uint32(i)*160)
				}
				check(t, in, out)
			}
		})
	}
}

// TestForwardPathsDoNotAllocate: no packet kind allocates once its reader
// has seen the first one (pion/rtp sizes the reused header's CSRC and
// extension slices, pion/rtcp the reused reports' slices, on the first
// packet that has them).
func TestForwardPathsDoNotAllocate(t *testing.T) {
	for _, tc := range pathCases {
		t.Run(tc.name, func(t *testing.T) {
			pkt, forward, _ := tc.setup(t)
			buf := make([]byte, len(pkt), maxPacket+srtpSlack)
			i := 0
			if _, ok := forwardOne(pkt, buf, forward, tc.isRTCP, i); !ok {
				t.Fatal("dropped")
			}
			n := testing.AllocsPerRun(200, func() {
				i++
				if _, ok := forwardOne(pkt, buf, forward, tc.isRTCP, i); !ok {
					t.Fatal("dropped")
				}
			})
			if n != 0 {
				t.Errorf("%v allocations per packet", n)
			}
		})
	}
}

// BenchmarkForwardPath is the relay's per-packet work (no send) for the
// packets BenchmarkForwardNoSend does not cover: a 1,100-byte video
// packet of a stream besides the audio, passed byte for byte (video),
// a source whose SSRC,
// sequence numbers and timestamps are rewritten (rewrite), a packet with
// CSRCs, an RFC 8285 header extension and padding (csrc-ext), an
// extension block with padding and a terminated element (ext-padding), a
// compound SR+RR+SDES whose sender SSRCs and RTP timestamp follow the
// rewrite (rtcp-sr), and the media server endpoints' path (endpoint). RTP
// cases are µ-law → A-law. It must report 0 allocs/op.
func BenchmarkForwardPath(b *testing.B) {
	for _, tc := range pathCases {
		b.Run(tc.name, func(b *testing.B) {
			pkt, forward, _ := tc.setup(b)
			buf := make([]byte, len(pkt), maxPacket+srtpSlack)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := forwardOne(pkt, buf, forward, tc.isRTCP, i); !ok {
					b.Fatal("dropped")
				}
				i++
			}
		})
	}
}
