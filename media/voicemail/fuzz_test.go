package voicemail

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/pion/rtp"
)

// FuzzLinePacket: whatever arrives on a line's port, the line neither
// crashes nor reports a digit that is not a key.
func FuzzLinePacket(f *testing.F) {
	pkt, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0}, Payload: make([]byte, 160)}).Marshal()
	ev, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 101, Timestamp: 7}, Payload: []byte{11, 0x8a, 0, 160}}).Marshal()
	f.Add(pkt)
	f.Add(ev)
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		st := &counters{}
		l := &Line{pt: 0, tePT: 101, digits: make(chan byte, 32), stats: st, pcm: make([]int16, 0, 2*frame)}
		l.record(func([]int16) {})
		var p rtp.Packet
		l.handle(b, netip.MustParseAddrPort("127.0.0.1:4000"), &p)
		select {
		case d := <-l.digits:
			if strings.IndexByte("0123456789*#ABCD", d) < 0 {
				t.Fatalf("digit %q", d)
			}
		default:
		}
	})
}

// FuzzParsePCM: a damaged message file is an error or samples, never a
// crash.
func FuzzParsePCM(f *testing.F) {
	f.Add(append(wavHeader(4), 1, 2, 3, 4))
	f.Add(wavHeader(1 << 30))
	f.Add([]byte("RIFF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pcm, err := parsePCM(b)
		if err == nil && 2*len(pcm) > len(b) {
			t.Fatalf("%d samples from %d bytes", len(pcm), len(b))
		}
	})
}
