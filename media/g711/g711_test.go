package g711

import (
	"math"
	"testing"
)

func TestKnownCodePoints(t *testing.T) {
	tests := []struct {
		name string
		got  int
		want int
	}{
		// G.711 Table 2a/2b: µ-law 0xFF/0x7F are +0/-0, 0x80/0x00 the extremes.
		{"ulaw 0xFF", int(UlawToLinear(0xFF)), 0},
		{"ulaw 0x7F", int(UlawToLinear(0x7F)), 0},
		{"ulaw 0x80", int(UlawToLinear(0x80)), 32124},
		{"ulaw 0x00", int(UlawToLinear(0x00)), -32124},
		{"ulaw 0xFE", int(UlawToLinear(0xFE)), 8},
		{"ulaw 0xEF (first code of segment 1)", int(UlawToLinear(0xEF)), 132},
		// G.711 Table 1a/1b: A-law 0xD5/0x55 are ±1 (×8 on the 16-bit scale).
		{"alaw 0xD5", int(AlawToLinear(0xD5)), 8},
		{"alaw 0x55", int(AlawToLinear(0x55)), -8},
		{"alaw 0xAA", int(AlawToLinear(0xAA)), 32256},
		{"alaw 0x2A", int(AlawToLinear(0x2A)), -32256},
		{"alaw 0xC5 (first code of segment 1)", int(AlawToLinear(0xC5)), 264},
		// Tables 3 and 4: zero, extremes and the G.191 corrected entries.
		{"u2a +0", int(UlawToAlaw(0xFF)), 0xD5},
		{"u2a -0", int(UlawToAlaw(0x7F)), 0x55},
		{"u2a +max", int(UlawToAlaw(0x80)), 0xAA},
		{"u2a -max", int(UlawToAlaw(0x00)), 0x2A},
		{"u2a ulaw mag 80 → alaw mag 80", int(UlawToAlaw(0xFF ^ 80)), 0xD5 ^ 79},
		{"a2u +1", int(AlawToUlaw(0xD5)), 0xFE},
		{"a2u -1", int(AlawToUlaw(0x55)), 0x7E},
		{"a2u +max", int(AlawToUlaw(0xAA)), 0x80},
		{"a2u alaw mag 79 → ulaw mag 80", int(AlawToUlaw(0xD5 ^ 79)), 0xFF ^ 80},
		{"encode ulaw 0", int(LinearToUlaw(0)), 0xFF},
		{"encode ulaw max", int(LinearToUlaw(math.MaxInt16)), 0x80},
		{"encode ulaw min", int(LinearToUlaw(math.MinInt16)), 0x00},
		{"encode alaw 0", int(LinearToAlaw(0)), 0xD5},
		{"encode alaw -1", int(LinearToAlaw(-1)), 0x55},
		{"encode alaw max", int(LinearToAlaw(math.MaxInt16)), 0xAA},
		{"encode alaw min", int(LinearToAlaw(math.MinInt16)), 0x2A},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %#x (%d), want %#x (%d)", tt.name, tt.got, tt.got, tt.want, tt.want)
		}
	}
}

// Encoding the reconstruction value of a code gives the code back (µ-law -0
// encodes as +0).
func TestEncodeDecodeRoundTrip(t *testing.T) {
	for i := 0; i < 256; i++ {
		c := byte(i)
		if got := LinearToUlaw(UlawToLinear(c)); got != c && c != 0x7F {
			t.Errorf("µ-law %#02x → %d → %#02x", c, UlawToLinear(c), got)
		}
		if got := LinearToAlaw(AlawToLinear(c)); got != c {
			t.Errorf("A-law %#02x → %d → %#02x", c, AlawToLinear(c), got)
		}
	}
}

// The encoders quantise: every 16-bit input decodes back within half the
// step of its segment (plus the clipping range at the extremes).
func TestQuantisationError(t *testing.T) {
	for s := math.MinInt16; s <= math.MaxInt16; s++ {
		v := int16(s)
		for _, l := range []Law{Ulaw, Alaw} {
			var got int16
			if l == Ulaw {
				got = UlawToLinear(LinearToUlaw(v))
			} else {
				got = AlawToLinear(LinearToAlaw(v))
			}
			if err, lim := abs(int(got)-s), maxErr(s); err > lim {
				t.Fatalf("%v: %d → %d, error %d > %d", l, s, got, err, lim)
			}
		}
	}
}

// maxErr is half the largest step (1024 on the 16-bit scale for both laws'
// top segment), or the clipping distance beyond the largest code.
func maxErr(s int) int {
	a := abs(s)
	switch {
	case a > 32256:
		return a - 32124 + 1
	case a < 64:
		return 8
	default:
		// step grows with the segment: about 1/16 of the magnitude, halved.
		return a/16 + 16
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Round trips between the laws move a code by at most one magnitude step
// and never change its sign; each conversion stays within the quantisation
// error of the coarser law.
func TestLawConversionProperties(t *testing.T) {
	for i := 0; i < 256; i++ {
		a := byte(i)
		if back := UlawToAlaw(AlawToUlaw(a)); a&0x80 != back&0x80 || abs(int((a^0x55)&0x7F)-int((back^0x55)&0x7F)) > 1 {
			t.Errorf("A→µ→A %#02x → %#02x → %#02x", a, AlawToUlaw(a), back)
		}
		if back := AlawToUlaw(UlawToAlaw(byte(i))); byte(i)&0x80 != back&0x80 || abs(int(^byte(i)&0x7F)-int(^back&0x7F)) > 1 {
			t.Errorf("µ→A→µ %#02x → %#02x → %#02x", i, UlawToAlaw(byte(i)), back)
		}
		u := byte(i)
		lu, la := int(UlawToLinear(u)), int(AlawToLinear(UlawToAlaw(u)))
		if (lu > 0 && la < 0) || (lu < 0 && la > 0) {
			t.Errorf("µ→A sign flip: %#02x (%d) → %d", u, lu, la)
		}
		if d := abs(lu - la); d > maxErr(lu) {
			t.Errorf("µ→A %#02x: %d → %d (error %d)", u, lu, la, d)
		}
	}
	// Both tables are monotonic over the positive magnitudes.
	for m := 1; m < 128; m++ {
		if AlawToLinear(UlawToAlaw(0xFF^byte(m))) < AlawToLinear(UlawToAlaw(0xFF^byte(m-1))) {
			t.Errorf("u2a not monotonic at magnitude %d", m)
		}
		if UlawToLinear(AlawToUlaw(0xD5^byte(m))) < UlawToLinear(AlawToUlaw(0xD5^byte(m-1))) {
			t.Errorf("a2u not monotonic at magnitude %d", m)
		}
	}
}

func TestTranscodePayload(t *testing.T) {
	pcm := make([]int16, 160)
	for i := range pcm {
		pcm[i] = int16(8000 * math.Sin(2*math.Pi*1000*float64(i)/8000))
	}
	u := Encode(nil, pcm, Ulaw)
	p := append([]byte(nil), u...)
	Transcode(p, Ulaw, Alaw)
	for i := range p {
		if p[i] != UlawToAlaw(u[i]) {
			t.Fatalf("sample %d: %#02x, want %#02x", i, p[i], UlawToAlaw(u[i]))
		}
	}
	got := Decode(nil, p, Alaw)
	for i := range got {
		if d := abs(int(got[i]) - int(pcm[i])); d > maxErr(int(pcm[i]))*2 {
			t.Errorf("sample %d: %d after µ→A, sent %d", i, got[i], pcm[i])
		}
	}
	Transcode(p, Alaw, Alaw) // no-op
	q := append([]byte(nil), p...)
	Transcode(p, Alaw, Ulaw)
	for i := range p {
		if p[i] != AlawToUlaw(q[i]) {
			t.Fatalf("A→µ sample %d: %#02x, want %#02x", i, p[i], AlawToUlaw(q[i]))
		}
	}
	if Ulaw.String() != "PCMU" || Alaw.String() != "PCMA" || Law(0).String() != "invalid" {
		t.Error("Law.String")
	}
}

func TestInPlaceDoesNotAllocate(t *testing.T) {
	p := make([]byte, 160)
	if n := testing.AllocsPerRun(100, func() { Transcode(p, Ulaw, Alaw); Transcode(p, Alaw, Ulaw) }); n != 0 {
		t.Errorf("%v allocations per conversion", n)
	}
}

func BenchmarkUlawToAlaw160(b *testing.B) {
	p := make([]byte, 160)
	for i := range p {
		p[i] = byte(i)
	}
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		UlawToAlawInPlace(p)
	}
}
