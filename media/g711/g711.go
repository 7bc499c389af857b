package g711

// Law is a G.711 companding law.
type Law uint8

// The two G.711 laws. The zero Law is invalid.
const (
	Ulaw Law = iota + 1 // µ-law (PCMU, RTP payload type 0)
	Alaw                // A-law (PCMA, RTP payload type 8)
)

// String returns the RTP encoding name of the law (RFC 3551 §4.5.14).
func (l Law) String() string {
	switch l {
	case Ulaw:
		return "PCMU"
	case Alaw:
		return "PCMA"
	}
	return "invalid"
}

// Silence is the code of a zero sample in each law (positive zero).
const (
	UlawSilence = 0xFF
	AlawSilence = 0xD5
)

var (
	ulawToAlaw [256]byte
	alawToUlaw [256]byte
	ulawToLin  [256]int16
	alawToLin  [256]int16
)

// u2aMag and a2uMag are G.711 Tables 3 and 4 for positive samples: entry i
// is the 1-based magnitude code of the other law for the 0-based magnitude
// code i (0 = smallest). Negative samples use the same entries; only the
// sign bit differs. Two entries carry the G.191 corrections (u2aMag[80] =
// 80, a2uMag[79] = 80).
var u2aMag = [128]uint8{
	1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8,
	9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
	25, 27, 29, 31, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
	46, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62,
	64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,
	80, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96,
	97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112,
	113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128,
}

var a2uMag = [128]uint8{
	1, 3, 5, 7, 9, 11, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23,
	24, 25, 26, 27, 28, 29, 30, 31, 32, 32, 33, 33, 34, 34, 35, 35,
	36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 48, 49, 49,
	50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 64,
	65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80,
	80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,
	96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
	112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127,
}

func init() {
	for i := 0; i < 256; i++ {
		c := byte(i)
		ulawToLin[i] = decodeUlaw(c)
		alawToLin[i] = decodeAlaw(c)
		// A µ-law code is the bit inverse of sign|segment|step, with the
		// sign bit set for positive samples after inversion (0xFF = +0).
		// An A-law code has its even bits inverted (XOR 0x55) and the sign
		// bit set for positive samples (0xD5 = smallest positive).
		if c&0x80 != 0 { // positive µ-law: magnitude index = 0x7F - low bits
			ulawToAlaw[i] = 0xD5 ^ (u2aMag[0xFF^c] - 1)
		} else {
			ulawToAlaw[i] = 0x55 ^ (u2aMag[0x7F^c] - 1)
		}
		if c&0x80 != 0 {
			alawToUlaw[i] = 0xFF ^ a2uMag[c^0xD5]
		} else {
			alawToUlaw[i] = 0x7F ^ a2uMag[c^0x55]
		}
	}
}

// decodeUlaw expands a µ-law code (G.711 §3): the inverted code holds the
// sign, a 3-bit segment and a 4-bit step; the biased magnitude is
// (step·8 + 132) << segment, and the bias 132 is removed again.
func decodeUlaw(c byte) int16 {
	c = ^c
	t := (int32(c&0x0F) << 3) + 0x84
	t <<= (c & 0x70) >> 4
	if c&0x80 != 0 {
		return int16(0x84 - t)
	}
	return int16(t - 0x84)
}

// decodeAlaw expands an A-law code (G.711 §2): segment 0 is linear, each
// higher segment doubles the step; the reconstruction value is the middle
// of the quantisation interval.
func decodeAlaw(c byte) int16 {
	c ^= 0x55
	t := int32(c&0x0F) << 4
	switch seg := (c & 0x70) >> 4; seg {
	case 0:
		t += 8
	case 1:
		t += 0x108
	default:
		t = (t + 0x108) << (seg - 1)
	}
	if c&0x80 != 0 {
		return int16(t)
	}
	return int16(-t)
}

// UlawToLinear returns the 16-bit linear value of a µ-law code.
func UlawToLinear(c byte) int16 { return ulawToLin[c] }

// AlawToLinear returns the 16-bit linear value of an A-law code.
func AlawToLinear(c byte) int16 { return alawToLin[c] }

// UlawToAlaw converts one µ-law code to A-law (G.711 Table 3).
func UlawToAlaw(c byte) byte { return ulawToAlaw[c] }

// AlawToUlaw converts one A-law code to µ-law (G.711 Table 4).
func AlawToUlaw(c byte) byte { return alawToUlaw[c] }

// LinearToUlaw encodes a 16-bit linear sample as µ-law: the magnitude is
// scaled to 14 bits, clipped, biased by 33, and its segment is the
// position of the leading one.
func LinearToUlaw(s int16) byte {
	v := int32(s) >> 2
	mask := byte(0xFF)
	if v < 0 {
		v = -v
		mask = 0x7F
	}
	if v > 8159 {
		v = 8159
	}
	v += 33
	if v > 0x1FFF { // beyond the last segment: the largest code
		return 0x7F ^ mask
	}
	seg := byte(0)
	for t := v >> 6; t != 0 && seg < 7; t >>= 1 {
		seg++
	}
	return (seg<<4 | byte(v>>(seg+1))&0x0F) ^ mask
}

// LinearToAlaw encodes a 16-bit linear sample as A-law: the magnitude is
// scaled to 13 bits; segments 0 and 1 share the same step.
func LinearToAlaw(s int16) byte {
	v := int32(s) >> 3
	mask := byte(0xD5)
	if v < 0 {
		v = -v - 1
		mask = 0x55
	}
	if v > 0x0FFF {
		v = 0x0FFF
	}
	seg := byte(0)
	for t := v >> 5; t != 0 && seg < 7; t >>= 1 {
		seg++
	}
	var c byte
	if seg < 2 {
		c = seg<<4 | byte(v>>1)&0x0F
	} else {
		c = seg<<4 | byte(v>>seg)&0x0F
	}
	return c ^ mask
}

// UlawToAlawInPlace converts a µ-law payload to A-law in place.
func UlawToAlawInPlace(p []byte) {
	for i, c := range p {
		p[i] = ulawToAlaw[c]
	}
}

// AlawToUlawInPlace converts an A-law payload to µ-law in place.
func AlawToUlawInPlace(p []byte) {
	for i, c := range p {
		p[i] = alawToUlaw[c]
	}
}

// Transcode converts payload p from law from to law to in place; it does
// nothing when the laws are equal or either is invalid.
func Transcode(p []byte, from, to Law) {
	switch {
	case from == Ulaw && to == Alaw:
		UlawToAlawInPlace(p)
	case from == Alaw && to == Ulaw:
		AlawToUlawInPlace(p)
	}
}

// Decode appends the linear samples of payload p in law l to dst.
func Decode(dst []int16, p []byte, l Law) []int16 {
	t := &ulawToLin
	if l == Alaw {
		t = &alawToLin
	}
	for _, c := range p {
		dst = append(dst, t[c])
	}
	return dst
}

// Encode appends the law-l codes of linear samples s to dst.
func Encode(dst []byte, s []int16, l Law) []byte {
	for _, v := range s {
		if l == Alaw {
			dst = append(dst, LinearToAlaw(v))
		} else {
			dst = append(dst, LinearToUlaw(v))
		}
	}
	return dst
}
