package relay

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// Every reader variant (the default, one datagram per raw recvmmsg and
// sendmmsg on Linux; 16 per call; the portable ReadFromUDPAddrPort one)
// relays a burst in order, from the right address, refuses strangers,
// relays RTCP, and allocates nothing per packet in the real read →
// forward → write loop.
func TestReaders(t *testing.T) {
	for _, tc := range []struct {
		name     string
		batch    int
		portable bool
	}{{"default", 0, false}, {"batch16", 16, false}, {"portable", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.batch > 1 && !batchSupported {
				t.Skip("recvmmsg reader is Linux only")
			}
			r := newRelay(t, Config{Batch: tc.batch})
			r.portableReaders = tc.portable
			pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
			_ = pb.rtp.SetReadBuffer(4 << 20)
			s, toBoxA, toBoxB := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"8 PCMA"})
			stranger := newPhone(t, netip.MustParseAddr("127.0.0.66"))
			stranger.send(toBoxA, 0, make([]byte, 160))

			const n = 2000
			pkt := pa.packet(0, make([]byte, 160))
			buf := make([]byte, 2048)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := range n {
				binary.BigEndian.PutUint16(pkt[2:], uint16(i))
				if _, err := pa.rtp.WriteToUDPAddrPort(pkt, toBoxA); err != nil {
					t.Fatal(err)
				}
				if i%50 == 49 { // keep the burst within the socket buffers
					waitFor(t, "relay to catch up", func() bool { return s.Stats()[A].Relayed >= uint64(i+1) })
				}
			}
			waitFor(t, "all relayed", func() bool { return s.Stats()[A].Relayed == n })
			runtime.ReadMemStats(&after)
			if d := after.Mallocs - before.Mallocs; d > n/10 {
				t.Errorf("%d allocations for %d relayed packets", d, n)
			}
			_ = pb.rtp.SetReadDeadline(time.Now().Add(5 * time.Second))
			for i := range n {
				k, from, err := pb.rtp.ReadFromUDPAddrPort(buf)
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if seq := binary.BigEndian.Uint16(buf[2:]); k != len(pkt) || seq != uint16(i) || buf[1]&0x7F != 8 || from != toBoxB {
					t.Fatalf("packet %d: len %d seq %d pt %d from %v", i, k, seq, buf[1]&0x7F, from)
				}
			}
			if st := s.Stats()[A]; st.Refused != 1 || st.Lost != 0 || st.Packets != n {
				t.Errorf("stats %+v", st)
			}
			// RTCP both ways.
			rr := []byte{0x80, 201, 0, 1, 0, 0, 0, 9}
			pb.rtcp.WriteToUDPAddrPort(rr, netip.AddrPortFrom(toBoxB.Addr(), toBoxB.Port()+1))
			_ = pa.rtcp.SetReadDeadline(time.Now().Add(5 * time.Second))
			if k, from, err := pa.rtcp.ReadFromUDPAddrPort(buf); err != nil || k != 8 || from.Port() != toBoxA.Port()+1 {
				t.Errorf("RTCP at A: %d from %v, %v", k, from, err)
			}
		})
	}
}
