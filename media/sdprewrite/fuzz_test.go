package sdprewrite

import (
	"bytes"
	"net/netip"
	"reflect"
	"strconv"
	"testing"

	pionsdp "github.com/pion/sdp/v3"
)

// FuzzRewrite feeds arbitrary bytes to Parse and, when they parse, checks
// that the rewritten SDP parses back to what was written, that rewriting
// is idempotent, and that Parse agrees with pion/sdp on every input pion
// accepts. Whatever ParseAny accepts must survive WithOrigin and
// WithSendRecv. Seeds: testdata/fuzz/FuzzRewrite.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte(polycom))
	f.Fuzz(func(t *testing.T, data []byte) {
		edits(t, data)
		s, err := Parse(data)
		if err != nil {
			return
		}
		if loose, err := ParseAny(data); err != nil || loose.Origin != s.Origin || !reflect.DeepEqual(loose.Audio, s.Audio) {
			t.Fatalf("ParseAny disagrees with Parse: %+v, %v", loose, err)
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
			Addr: netip.MustParseAddr("198.18.7.1"), Port: 40000, Codecs: codecs, Direction: s.Audio.Direction.Reverse(),
			Streams: map[int]Stream{}}
		for i, sec := range s.Sections {
			if i != s.AudioIndex && sec.Relayable() {
				p.Streams[i] = Stream{Port: 40002 + 2*i, Direction: sec.Direction.Reverse()}
			}
		}
		out := s.Rewrite(p)
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("rewritten SDP does not parse: %v\n%s", err, out)
		}
		if len(back.Sections) != len(s.Sections) || back.AudioIndex != s.AudioIndex {
			t.Fatalf("sections: %d, audio at %d; wrote %d, audio at %d\n%s", len(back.Sections), back.AudioIndex,
				len(s.Sections), s.AudioIndex, out)
		}
		for i, sec := range back.Sections {
			st, relayed := p.Streams[i]
			switch {
			case i == s.AudioIndex:
			case relayed && (sec.Port != st.Port || sec.Direction != st.Direction || sec.Addr != p.Addr || !sec.Relayable()):
				t.Fatalf("stream %d: %+v, wrote %+v\n%s", i, sec, st, out)
			case !relayed && sec.Valid && sec.Port != 0:
				t.Fatalf("section %d not rejected: %+v\n%s", i, sec, out)
			}
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

// edits checks WithOrigin and WithSendRecv on whatever ParseAny accepts.
func edits(t *testing.T, data []byte) {
	s, err := ParseAny(data)
	if err != nil {
		return
	}
	o := Origin{"outpost", "9", 4, "IN", "IP4", "198.18.7.1", netip.MustParseAddr("198.18.7.1")}
	if out := s.WithOrigin(o); len(out) <= MaxSize {
		back, err := ParseAny(out)
		if err != nil || s.originAt >= 0 && back.Origin != o || s.HasAudio() != back.HasAudio() {
			t.Fatalf("WithOrigin: %+v, %v\n%s", back, err, out)
		}
	}
	if out := s.WithSendRecv(); len(out) <= MaxSize {
		back, err := ParseAny(out)
		if err != nil || back.Audio.Direction != SendRecv || back.Origin != s.Origin {
			t.Fatalf("WithSendRecv: %+v, %v\n%s", back, err, out)
		}
	}
}

// oracle compares Parse with pion/sdp on input pion accepts.
func oracle(t *testing.T, data []byte, s *SDP) {
	var sd pionsdp.SessionDescription
	if sd.Unmarshal(data) != nil {
		return
	}
	// A six-field o= line reads the same (pion fills in missing fields, so
	// only a complete line is compared; pion reads the session id as a
	// number, we keep it as written).
	if o := s.Origin; !o.IsZero() {
		po := sd.Origin
		if po.Username != o.Username || po.SessionVersion != o.Version || po.NetworkType != o.NetType ||
			po.AddressType != o.AddrType || po.UnicastAddress != o.Address {
			t.Fatalf("origin: pion %+v, ours %+v", po, o)
		}
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
