package relay

import (
	"encoding/binary"
	"testing"
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
				out, conn, dst, ok := f.rtp(buf, src, int64(i)*20e6)
				if !ok {
					b.Fatal("packet dropped")
				}
				if _, err := conn.WriteToUDPAddrPort(out, dst); err != nil {
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
