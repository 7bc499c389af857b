package moh

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/outpost/outpost/media/g711"
)

// wav builds a RIFF/WAVE file with one fmt and one data chunk.
func wav(format, channels uint16, rate uint32, bits uint16, data []byte) []byte {
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(4 + 8 + 16 + 8 + len(data)))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(format)
	le(channels)
	le(rate)
	le(rate * uint32(channels) * uint32(bits) / 8)
	le(channels * bits / 8)
	le(bits)
	b.WriteString("data")
	le(uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}

func TestParseWAVFormats(t *testing.T) {
	lin := make([]int16, 800)
	for i := range lin {
		lin[i] = int16((i%40 - 20) * 800)
	}
	want := g711.Encode(nil, lin, g711.Ulaw)
	pcm := make([]byte, 2*len(lin))
	for i, s := range lin {
		binary.LittleEndian.PutUint16(pcm[2*i:], uint16(s))
	}
	alaw := g711.Encode(nil, lin, g711.Alaw)
	for name, file := range map[string][]byte{
		"pcm16": wav(formatPCM, 1, 8000, 16, pcm),
		"ulaw":  wav(formatULaw, 1, 8000, 8, want),
		"alaw":  wav(formatALaw, 1, 8000, 8, alaw),
	} {
		got, err := ParseWAV(file)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d samples, want %d", name, len(got), len(want))
			continue
		}
		for i := range got { // A-law and µ-law round to different steps: compare in linear
			if d := int(g711.UlawToLinear(got[i])) - int(g711.UlawToLinear(want[i])); d > 1100 || d < -1100 {
				t.Fatalf("%s: sample %d is %d, want about %d", name, i, g711.UlawToLinear(got[i]), g711.UlawToLinear(want[i]))
			}
		}
	}
}

func TestParseWAVRefuses(t *testing.T) {
	frame := make([]byte, 320)
	for _, tc := range []struct {
		name, want string
		file       []byte
	}{
		{"not riff", "not a RIFF/WAVE", []byte("OggS....")},
		{"stereo", "2 channels at 8000 Hz", wav(formatPCM, 2, 8000, 16, frame)},
		{"16 kHz", "1 channels at 16000 Hz", wav(formatPCM, 1, 16000, 16, frame)},
		{"float", "format 3 with 32 bits", wav(3, 1, 8000, 32, frame)},
		{"short", "shorter than one 20 ms frame", wav(formatULaw, 1, 8000, 8, frame[:100])},
		{"too long", "at most 60 s", wav(formatULaw, 1, 8000, 8, make([]byte, 61*8000))},
		{"truncated", "runs past the end", wav(formatULaw, 1, 8000, 8, frame)[:60]},
		{"no data", "no data chunk", wav(formatULaw, 1, 8000, 8, frame)[:36]},
	} {
		if _, err := ParseWAV(tc.file); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestDefaultIsAudible(t *testing.T) {
	d := Default()
	if len(d) < 8000 {
		t.Fatalf("default recording of %d samples", len(d))
	}
	loud := 0
	for _, c := range d {
		if s := g711.UlawToLinear(c); s > 1000 || s < -1000 {
			loud++
		}
	}
	if loud < len(d)/4 {
		t.Errorf("only %d of %d samples above -30 dBFS: not music", loud, len(d))
	}
}

func FuzzParseWAV(f *testing.F) {
	f.Add(wav(formatULaw, 1, 8000, 8, make([]byte, 200)))
	f.Add(wav(formatPCM, 1, 8000, 16, make([]byte, 400)))
	f.Add([]byte("RIFF\x04\x00\x00\x00WAVE"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := ParseWAV(b)
		if err == nil && (len(out) < 160 || len(out) > MaxSeconds*8000) {
			t.Fatalf("accepted %d samples", len(out))
		}
	})
}
