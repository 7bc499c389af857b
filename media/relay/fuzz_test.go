package relay

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/pion/rtp"
)

// FuzzForward feeds arbitrary datagrams to a transcoding leg's RTP path
// (isRTCP false) and RTCP path (true), with a rewritten source so that
// every header field and the RTCP walk are exercised. Whatever arrives, the
// relay must not panic; a relayed RTP packet keeps its length, parses with
// pion as the input did, and keeps every byte outside the fixed header's
// second to twelfth byte and the payload; relayed RTCP keeps its length.
// Seeds in testdata/fuzz/FuzzForward.
func FuzzForward(f *testing.F) {
	for _, tc := range pathCases {
		pkt, _, _ := tc.setup(f)
		f.Add(pkt, tc.isRTCP)
	}
	f.Add([]byte{0x80, 0}, false)
	f.Add([]byte{0x8F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false) // 15 CSRCs announced, none there
	f.Add([]byte{0x80, 201, 0, 1, 0, 0, 0, 9}, true)
	fa, pa, _ := legA(f, "8 PCMA")
	remapped(f, fa, pa)
	src := pa.addr()
	srcRTCP := pa.rtcp.LocalAddr().(interface{ AddrPort() netip.AddrPort }).AddrPort()
	buf := make([]byte, 0, maxPacket+srtpSlack)
	f.Fuzz(func(t *testing.T, data []byte, isRTCP bool) {
		if len(data) > maxPacket {
			return
		}
		p := append(buf[:0], data...)
		if isRTCP {
			if out, _, _, ok := fa.rtcpPacket(p, srcRTCP); ok && len(out) != len(data) {
				t.Fatalf("RTCP of %d bytes relayed as %d", len(data), len(out))
			}
			return
		}
		out, _, _, ok := fa.rtp(p, src, 0)
		var in rtp.Packet
		if in.Unmarshal(data) != nil || in.Version != 2 {
			if ok {
				t.Fatalf("relayed a packet pion refuses: %x", data)
			}
			return
		}
		if !ok {
			return // e.g. a payload type that is not negotiated
		}
		var got rtp.Packet
		if err := got.Unmarshal(out); err != nil || len(out) != len(data) {
			t.Fatalf("relayed %x as %x (%v)", data, out, err)
		}
		hl := len(data) - len(in.Payload) - int(in.PaddingSize)
		if out[0] != data[0] || !bytes.Equal(out[12:hl], data[12:hl]) || !bytes.Equal(out[len(out)-int(in.PaddingSize):], data[len(data)-int(in.PaddingSize):]) {
			t.Fatalf("bytes outside the fixed header and payload changed:\n in %x\nout %x", data, out)
		}
	})
}
