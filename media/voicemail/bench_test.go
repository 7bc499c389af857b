package voicemail

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/pion/rtp"
)

// BenchmarkRecordPacket is the box's work for one 20 ms packet of a
// caller leaving a message: RTP parse, G.711 decode, silence level, WAV
// append (the once-a-second fsync is not in it: see bench/RESULTS.md).
func BenchmarkRecordPacket(b *testing.B) {
	s, _, _ := newService(b, Limits{})
	l := &Line{pt: 0, tePT: 101, digits: make(chan byte, 32), stats: &s.stats, pcm: make([]int16, 0, 2*frame)}
	w, err := createWAV(filepath.Join(b.TempDir(), "m.wav"), int64(b.N+1)*2*frame)
	if err != nil {
		b.Fatal(err)
	}
	rec := &recorder{w: w, begun: time.Now(), lastLoud: time.Now()}
	l.record(rec.sink)
	pkt, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SSRC: 1}, Payload: make([]byte, frame)}).Marshal()
	from := netip.MustParseAddrPort("127.0.0.1:40000")
	var p rtp.Packet
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l.handle(pkt, from, &p)
	}
	b.StopTimer()
	_, _ = rec.close()
}
