package relay

import (
	"testing"
)

// Malformed RTP from the latched source: dropped and counted. pion/rtp
// builds its errors for a truncated CSRC list or header extension with
// fmt.Errorf, so those drops allocate (measured by
// BenchmarkForwardMalformed, stated in the package doc); runts and
// non-version-2 datagrams are refused before pion sees them and do not.
var malformedRTP = []struct {
	name  string
	pkt   []byte
	alloc bool // pion allocates its error
}{
	{"runt", []byte{0x80, 0, 0, 1, 0, 0, 0, 0}, false},
	{"version-1", append([]byte{0x40}, make([]byte, 171)...), false},
	{"truncated-csrc", append([]byte{0x8F}, make([]byte, 19)...), true},                                                  // 15 CSRCs announced, 2 present
	{"truncated-ext", append([]byte{0x90, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xBE, 0xDE, 0, 9}, make([]byte, 8)...), true}, // 9 words announced, 2 present
	{"bad-padding", append([]byte{0xA0}, make([]byte, 171)...), false},                                                   // padding count 0 (errInvalidRTPPadding, a static error)
}

func TestMalformedRTPDropped(t *testing.T) {
	f, pa, _ := legA(t, "8 PCMA")
	src := pa.addr()
	buf := make([]byte, 0, maxPacket+srtpSlack)
	for _, tc := range malformedRTP {
		t.Run(tc.name, func(t *testing.T) {
			dropped := f.in.dropped.Load()
			if _, _, _, ok := f.rtp(append(buf[:0], tc.pkt...), src, 0); ok {
				t.Fatal("relayed")
			}
			if got := f.in.dropped.Load(); got != dropped+1 {
				t.Errorf("dropped counter %d → %d", dropped, got)
			}
			if tc.alloc || raceEnabled {
				return
			}
			if n := testing.AllocsPerRun(100, func() { f.rtp(append(buf[:0], tc.pkt...), src, 0) }); n != 0 {
				t.Errorf("%v allocations per dropped packet", n)
			}
		})
	}
}

// BenchmarkForwardMalformed measures what a malformed packet from the
// latched source costs, allocations included.
func BenchmarkForwardMalformed(b *testing.B) {
	for _, tc := range malformedRTP {
		b.Run(tc.name, func(b *testing.B) {
			f, pa, _ := legA(b, "8 PCMA")
			src := pa.addr()
			buf := make([]byte, 0, maxPacket+srtpSlack)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, ok := f.rtp(append(buf[:0], tc.pkt...), src, 0); ok {
					b.Fatal("relayed")
				}
			}
		})
	}
}
