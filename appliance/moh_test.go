package appliance

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/media/moh"
)

// ulawWAV is a µ-law WAV file of n samples (RIFF with fmt and data).
func ulawWAV(rate uint32, samples []byte) []byte {
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + len(samples)))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(7)) // µ-law
	le(uint16(1))
	le(rate)
	le(rate)
	le(uint16(1))
	le(uint16(8))
	b.WriteString("data")
	le(uint32(len(samples)))
	b.Write(samples)
	return b.Bytes()
}

func TestMusicOnHoldOfTheDocument(t *testing.T) {
	own := bytes.Repeat([]byte{0x42, 0x24}, 400)
	for _, tc := range []struct {
		value string
		want  []byte
	}{
		{"", moh.Default()},
		{"off", nil},
		{base64.StdEncoding.EncodeToString(ulawWAV(8000, own)), own},
	} {
		got := musicOnHold(config.Media{MusicOnHold: tc.value})
		if !bytes.Equal(got, tc.want) {
			t.Errorf("music_on_hold %.10q: %d samples, want %d", tc.value, len(got), len(tc.want))
		}
	}
}

// A WAV file the relay cannot play refuses the push at its field; the
// running document stays.
func TestMusicOnHoldBadWAVRefused(t *testing.T) {
	a := startApp(t, encode(t, testDoc(t)))
	before := a.running().version
	d := testDoc(t)
	d["media"] = map[string]any{"music_on_hold": base64.StdEncoding.EncodeToString(ulawWAV(16000, make([]byte, 800)))}
	_, err := a.Apply(t.Context(), encode(t, d), "test", 0, false)
	var ve *api.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Path != "media.music_on_hold" || !strings.Contains(ve.Errors[0].Message, "16000 Hz") {
		t.Fatalf("push with a 16 kHz WAV: %v, want one error at media.music_on_hold naming the rate", err)
	}
	if a.running().version != before {
		t.Error("a refused push changed the running version")
	}
}
