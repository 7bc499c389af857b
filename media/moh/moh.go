package moh

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/outpost/outpost/media/g711"
)

//go:generate go run gen.go

//go:embed default.ulaw
var defaultULaw []byte

// Default is the recording shipped in the image (µ-law, 8 kHz). Callers
// must not change it.
func Default() []byte { return defaultULaw }

// MaxSeconds bounds a recording: 8000 bytes a second of µ-law.
const MaxSeconds = 60

// WAV format tags (the fmt chunk's AudioFormat).
const (
	formatPCM  = 1
	formatALaw = 6
	formatULaw = 7
)

// ParseWAV reads a RIFF/WAVE file of 8 kHz mono audio, 16-bit PCM, A-law
// or µ-law, and returns it as µ-law samples. Anything else is an error
// that says what the file is.
func ParseWAV(b []byte) ([]byte, error) {
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return nil, errors.New("not a RIFF/WAVE file")
	}
	var format, channels, bits uint16
	var rate uint32
	haveFmt := false
	for rest := b[12:]; len(rest) >= 8; {
		id, size := string(rest[0:4]), binary.LittleEndian.Uint32(rest[4:8])
		rest = rest[8:]
		if uint64(size) > uint64(len(rest)) {
			return nil, fmt.Errorf("chunk %q of %d bytes runs past the end of the file", id, size)
		}
		body := rest[:size]
		rest = rest[size:]
		if size%2 == 1 && len(rest) > 0 {
			rest = rest[1:] // RIFF pads chunks to even sizes
		}
		switch id {
		case "fmt ":
			if len(body) < 16 {
				return nil, errors.New("fmt chunk shorter than 16 bytes")
			}
			format, channels = binary.LittleEndian.Uint16(body[0:2]), binary.LittleEndian.Uint16(body[2:4])
			rate, bits = binary.LittleEndian.Uint32(body[4:8]), binary.LittleEndian.Uint16(body[14:16])
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, errors.New("data chunk before the fmt chunk")
			}
			return samples(body, format, channels, rate, bits)
		}
	}
	return nil, errors.New("no data chunk")
}

func samples(data []byte, format, channels uint16, rate uint32, bits uint16) ([]byte, error) {
	if channels != 1 || rate != 8000 {
		return nil, fmt.Errorf("%d channels at %d Hz: want mono at 8000 Hz", channels, rate)
	}
	var out []byte
	switch {
	case format == formatULaw && bits == 8:
		out = append([]byte(nil), data...)
	case format == formatALaw && bits == 8:
		out = append([]byte(nil), data...)
		g711.AlawToUlawInPlace(out)
	case format == formatPCM && bits == 16:
		out = make([]byte, len(data)/2)
		for i := range out {
			out[i] = g711.LinearToUlaw(int16(binary.LittleEndian.Uint16(data[2*i:])))
		}
	default:
		return nil, fmt.Errorf("format %d with %d bits per sample: want 16-bit PCM (1), A-law (6) or µ-law (7)", format, bits)
	}
	switch {
	case len(out) < 8000/50:
		return nil, errors.New("shorter than one 20 ms frame")
	case len(out) > MaxSeconds*8000:
		return nil, fmt.Errorf("%d s long: at most %d s", len(out)/8000, MaxSeconds)
	}
	return out, nil
}
