package sdprewrite

import (
	"bytes"
	"net/netip"
	"strconv"
	"testing"

	pionsdp "github.com/pion/sdp/v3"
)

// FuzzRewrite feeds arbitrary bytes to Parse and, when they parse, checks
// that the rewritten SDP parses back to what was written, that rewriting
// is idempotent, and that Parse agrees with pion/sdp on every input pion
// accepts. Seeds: testdata/fuzz/FuzzRewrite.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte(polycom))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		oracle(t, data, s)
		codecs := s.Audio.Codecs
		if len(codecs) > 4 {
			codecs = codecs[:4]
		}
		for i := range codecs {
			if codecs[i].Name == "" { // unknown dynamic type: as the relay would name it
				codecs[i].Name, codecs[i].Rate = "X-unknown", 8000
			}
		}
		p := Params{Origin: Origin{Username: "outpost", SessID: "9", Version: 3},
			Addr: netip.MustParseAddr("198.18.7.1"), Port: 40000, Codecs: codecs, Direction: s.Audio.Direction.Reverse()}
		out := s.Rewrite(p)
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("rewritten SDP does not parse: %v\n%s", err, out)
		}
		a := back.Audio
		p0 := p
		if len(codecs) == 0 { // m= gets a placeholder format (RFC 4566 needs one)
			codecs = a.Codecs[:min(1, len(a.Codecs))]
		}
		if a.Port != 40000 || a.Addr != p.Addr || a.Direction != p.Direction || len(a.Codecs) != len(codecs) {
			t.Fatalf("re-parse: port=%d addr=%v dir=%v codecs=%v\n%s", a.Port, a.Addr, a.Direction, a.Codecs, out)
		}
		for i, c := range codecs {
			if a.Codecs[i].PT != c.PT || !a.Codecs[i].Is(c.Name) {
				t.Fatalf("codec %d: %+v, wrote %+v\n%s", i, a.Codecs[i], c, out)
			}
		}
		if s.Audio.RTCPPort != 0 && a.RTCPPort != 40001 {
			t.Fatalf("a=rtcp %d\n%s", a.RTCPPort, out)
		}
		if again := back.Rewrite(p0); len(p0.Codecs) > 0 && !bytes.Equal(again, out) {
			t.Fatalf("rewrite not idempotent:\n%s\n---\n%s", out, again)
		}
	})
}

// oracle compares Parse with pion/sdp on input pion accepts.
func oracle(t *testing.T, data []byte, s *SDP) {
	var sd pionsdp.SessionDescription
	if sd.Unmarshal(data) != nil {
		return
	}
	for _, md := range sd.MediaDescriptions {
		if md.MediaName.Media != "audio" {
			continue
		}
		if md.MediaName.Port.Value != s.Audio.Port {
			t.Fatalf("port: pion %d, ours %d", md.MediaName.Port.Value, s.Audio.Port)
		}
		var pts []uint8
		for _, f := range md.MediaName.Formats {
			n, err := strconv.ParseUint(f, 10, 7)
			if err != nil {
				continue
			}
			dup := false
			for _, p := range pts {
				dup = dup || p == uint8(n)
			}
			if !dup {
				pts = append(pts, uint8(n))
			}
		}
		if len(pts) != len(s.Audio.Codecs) {
			t.Fatalf("formats: pion %v, ours %v", md.MediaName.Formats, s.Audio.Codecs)
		}
		for i := range pts {
			if pts[i] != s.Audio.Codecs[i].PT {
				t.Fatalf("formats: pion %v, ours %v", md.MediaName.Formats, s.Audio.Codecs)
			}
		}
		return
	}
}
