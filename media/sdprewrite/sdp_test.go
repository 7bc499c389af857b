package sdprewrite

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	pionsdp "github.com/pion/sdp/v3"
)

// sdpLines joins lines with CRLF and a final CRLF.
func sdpLines(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n" }

var polycom = sdpLines(
	"v=0",
	"o=- 1700000000 1700000000 IN IP4 198.18.1.20",
	"s=Polycom IP Phone",
	"c=IN IP4 198.18.1.20",
	"t=0 0",
	"a=sendrecv",
	"m=audio 2226 RTP/AVP 0 8 18 101",
	"a=rtpmap:0 PCMU/8000",
	"a=rtpmap:8 PCMA/8000",
	"a=rtpmap:18 G729/8000",
	"a=fmtp:18 annexb=no",
	"a=rtpmap:101 telephone-event/8000",
	"a=fmtp:101 0-15",
	"a=ptime:20",
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		sdp    string
		port   int
		addr   string
		codecs []string // "PT NAME"
		dir    Direction
		hold   bool
		rtcp   int
		ptime  int
	}{
		{"polycom", polycom, 2226, "198.18.1.20", []string{"0 PCMU", "8 PCMA", "18 G729", "101 telephone-event"}, SendRecv, false, 0, 20},
		{"LF only, no final newline, c= after t=, no rtpmap for static types",
			"v=0\no=x 1 1 IN IP4 198.18.1.21\ns=-\nt=0 0\nc=IN IP4 198.18.1.21\nm=audio 4000 RTP/AVP 8 0\na=sendonly",
			4000, "198.18.1.21", []string{"8 PCMA", "0 PCMU"}, SendOnly, false, 0, 0},
		{"no t= line, lower-case names, trailing blanks",
			"v=0 \r\no=x 1 1 IN IP4 198.18.1.22\r\ns=-\r\nc=IN IP4 198.18.1.22\r\nm=audio 4002 RTP/AVP 96 97\r\na=rtpmap:96 pcmu/8000\r\na=rtpmap:97 Telephone-Event/8000\r\n",
			4002, "198.18.1.22", []string{"96 pcmu", "97 Telephone-Event"}, SendRecv, false, 0, 0},
		{"media-level c= wins, session-level direction applies",
			sdpLines("v=0", "o=x 1 1 IN IP4 198.18.1.1", "s=-", "c=IN IP4 198.18.1.1", "t=0 0", "a=recvonly",
				"m=audio 5000/2 RTP/AVP 0", "c=IN IP4 198.18.1.23/127"),
			5000, "198.18.1.23", []string{"0 PCMU"}, RecvOnly, false, 0, 0},
		{"RFC 2543 hold with a=rtcp",
			sdpLines("v=0", "o=x 1 2 IN IP4 198.18.1.24", "s=-", "c=IN IP4 0.0.0.0", "t=0 0",
				"m=audio 6000 RTP/AVP 0", "a=rtcp:6003 IN IP4 198.18.1.24", "a=inactive"),
			6000, "0.0.0.0", []string{"0 PCMU"}, Inactive, true, 6003, 0},
		{"IPv6, video first",
			sdpLines("v=0", "o=x 1 1 IN IP6 2001:2::5", "s=-", "c=IN IP6 2001:2::5", "t=0 0",
				"m=video 7000 RTP/AVP 96", "a=rtpmap:96 H264/90000", "a=sendonly",
				"m=audio 7002 RTP/AVP 0 foo", "a=ptime:30"),
			7002, "2001:2::5", []string{"0 PCMU"}, SendRecv, false, 0, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.sdp))
			if err != nil {
				t.Fatal(err)
			}
			a := s.Audio
			var codecs []string
			for _, c := range a.Codecs {
				codecs = append(codecs, strconv.Itoa(int(c.PT))+" "+c.Name)
			}
			if a.Port != tt.port || a.Addr != netip.MustParseAddr(tt.addr) || !slices.Equal(codecs, tt.codecs) ||
				a.Direction != tt.dir || a.Hold != tt.hold || a.RTCPPort != tt.rtcp || a.Ptime != tt.ptime {
				t.Errorf("got port=%d addr=%v codecs=%q dir=%v hold=%v rtcp=%d ptime=%d",
					a.Port, a.Addr, codecs, a.Direction, a.Hold, a.RTCPPort, a.Ptime)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		sdp  string
		want error
	}{
		{"", ErrEmpty},
		{" \r\n", ErrEmpty},
		{sdpLines("v=0", "o=x 1 1 IN IP4 198.18.1.1", "s=-", "t=0 0", "m=video 5000 RTP/AVP 96"), ErrNoAudio},
		{strings.Repeat("a=x\r\n", MaxSize/5+1), ErrTooLarge},
	}
	for _, tt := range tests {
		if _, err := Parse([]byte(tt.sdp)); !errors.Is(err, tt.want) {
			t.Errorf("Parse(%.30q) = %v, want %v", tt.sdp, err, tt.want)
		}
	}
	if _, err := Parse([]byte("v=0\r\nm=audio many RTP/AVP 0\r\n")); err == nil {
		t.Error("bad m= port accepted")
	}
}

func TestRewrite(t *testing.T) {
	in := sdpLines(
		"v=0",
		"o=alice 2890844526 2890844527 IN IP4 198.18.1.30",
		"s=-",
		"c=IN IP4 198.18.1.30",
		"t=0 0",
		"a=ice-ufrag:abcd",
		"a=group:BUNDLE 0 1",
		"m=audio 49170 RTP/AVP 0 8 101",
		"a=rtpmap:0 PCMU/8000",
		"a=rtpmap:8 PCMA/8000",
		"a=rtpmap:101 telephone-event/8000",
		"a=fmtp:101 0-16",
		"a=rtcp:49171 IN IP4 198.18.1.30",
		"a=candidate:1 1 UDP 2130706431 198.18.1.30 49170 typ host",
		"a=rtcp-mux",
		"a=ssrc:1234 cname:x",
		"a=ptime:20",
		"a=maxptime:40",
		"a=sendonly",
		"m=video 51372 RTP/AVP 96",
		"a=rtpmap:96 H264/90000",
	)
	s, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	box := netip.MustParseAddr("198.18.2.1")
	out := s.Rewrite(Params{
		Origin:    Origin{Username: "outpost", SessID: "42", Version: 7},
		Addr:      box,
		Port:      30000,
		Codecs:    []Codec{{PT: 8, Name: "PCMA", Rate: 8000}, {PT: 0, Name: "PCMU", Rate: 8000}, {PT: 96, Name: "telephone-event", Rate: 8000, Fmtp: "0-16"}},
		Direction: SendOnly,
	})
	want := sdpLines(
		"v=0",
		"o=outpost 42 7 IN IP4 198.18.2.1",
		"s=-",
		"c=IN IP4 198.18.2.1",
		"t=0 0",
		"m=audio 30000 RTP/AVP 8 0 96",
		"a=ptime:20",
		"a=maxptime:40",
		"a=rtpmap:8 PCMA/8000",
		"a=rtpmap:0 PCMU/8000",
		"a=rtpmap:96 telephone-event/8000",
		"a=fmtp:96 0-16",
		"a=rtcp:30001 IN IP4 198.18.2.1",
		"a=sendonly",
		"m=video 0 RTP/AVP 96",
		"a=rtpmap:96 H264/90000",
	)
	if string(out) != want {
		t.Errorf("rewrite:\n%s\nwant:\n%s", out, want)
	}
	// Well-formed in, well-formed out: pion/sdp accepts what we wrote.
	var sd pionsdp.SessionDescription
	if err := sd.Unmarshal(out); err != nil {
		t.Errorf("pion/sdp rejects the rewritten SDP: %v", err)
	}
	back, err := Parse(out)
	if err != nil || back.Audio.Port != 30000 || back.Audio.Addr != box || back.Audio.Direction != SendOnly || back.Audio.RTCPPort != 30001 {
		t.Errorf("re-parse: %+v, %v", back, err)
	}
}

func TestRewriteWithoutSessionConnection(t *testing.T) {
	// c= only inside the audio section, LF line ends, no final newline.
	in := "v=0\no=x 1 1 IN IP6 2001:2::9\ns=-\nt=0 0\nm=audio 9000 RTP/AVP 0\nc=IN IP6 2001:2::9\na=rtpmap:0 PCMU/8000"
	s, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out := string(s.Rewrite(Params{Origin: Origin{SessID: "1", Version: 1}, Addr: netip.MustParseAddr("2001:2::1"), Port: 31000,
		Codecs: s.Audio.Codecs}))
	want := sdpLines("v=0", "o=- 1 1 IN IP6 2001:2::1", "s=-", "t=0 0", "m=audio 31000 RTP/AVP 0", "c=IN IP6 2001:2::1",
		"a=rtpmap:0 PCMU/8000", "a=sendrecv")
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestIntersect(t *testing.T) {
	offered := []Codec{{PT: 18, Name: "G729"}, {PT: 8, Name: "PCMA"}, {PT: 101, Name: "telephone-event"}, {PT: 0, Name: "pcmu"}}
	got := Intersect(offered, []string{"PCMU", "PCMA", "telephone-event"})
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"pcmu", "PCMA", "telephone-event"}) {
		t.Errorf("Intersect = %v", names)
	}
	if len(Intersect(offered, nil)) != 0 {
		t.Error("empty allowed list must give nothing")
	}
	if c, ok := Find(offered, "TELEPHONE-EVENT"); !ok || c.PT != 101 {
		t.Errorf("Find = %+v %v", c, ok)
	}
}

func TestDirection(t *testing.T) {
	for _, d := range []Direction{SendRecv, SendOnly, RecvOnly, Inactive} {
		if Make(d.Sends(), d.Receives()) != d {
			t.Errorf("Make(%v)", d)
		}
		if d.Reverse().Reverse() != d || d.Reverse().Sends() != d.Receives() {
			t.Errorf("Reverse(%v) = %v", d, d.Reverse())
		}
	}
}

func TestParseOrigin(t *testing.T) {
	tests := []struct {
		name, line string
		want       Origin
	}{
		{"IPv4", "o=alice 2890844526 2890844527 IN IP4 198.18.1.30",
			Origin{"alice", "2890844526", 2890844527, "IN", "IP4", "198.18.1.30", netip.MustParseAddr("198.18.1.30")}},
		{"host name, extra blanks", "o=-  42\t7 IN IP4 pbx.example.com ",
			Origin{"-", "42", 7, "IN", "IP4", "pbx.example.com", netip.Addr{}}},
		{"IPv6", "o=x 1 18446744073709551615 IN IP6 2001:2::5",
			Origin{"x", "1", 18446744073709551615, "IN", "IP6", "2001:2::5", netip.MustParseAddr("2001:2::5")}},
		// RFC 4566 §5.2 has exactly six fields; anything else is no origin.
		{"five fields", "o=x 1 1 IN IP4", Origin{}},
		{"seven fields", "o=x 1 1 IN IP4 198.18.1.1 extra", Origin{}},
		{"version not a number", "o=x 1 v2 IN IP4 198.18.1.1", Origin{}},
		{"version beyond 64 bits", "o=x 1 18446744073709551616 IN IP4 198.18.1.1", Origin{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(sdpLines("v=0", tt.line, "s=-", "c=IN IP4 198.18.1.1", "t=0 0", "m=audio 4000 RTP/AVP 0")))
			if err != nil {
				t.Fatal(err)
			}
			if s.Origin != tt.want {
				t.Errorf("Origin = %+v, want %+v", s.Origin, tt.want)
			}
			if s.Origin.IsZero() != (tt.want == Origin{}) {
				t.Errorf("IsZero = %v", s.Origin.IsZero())
			}
		})
	}
	// The first session-level o= counts; one inside a media section is not
	// the session's origin (RFC 4566 §5).
	s, err := Parse([]byte(sdpLines("v=0", "o=a 1 1 IN IP4 198.18.1.1", "o=b 2 2 IN IP4 198.18.1.2", "s=-", "t=0 0", "m=audio 4000 RTP/AVP 0")))
	if err != nil || s.Origin.Username != "a" {
		t.Errorf("two o= lines: %+v, %v", s.Origin, err)
	}
	s, err = Parse([]byte(sdpLines("v=0", "s=-", "t=0 0", "m=audio 4000 RTP/AVP 0", "o=b 2 2 IN IP4 198.18.1.2")))
	if err != nil || !s.Origin.IsZero() {
		t.Errorf("o= in a media section: %+v, %v", s.Origin, err)
	}
}

func TestOriginSameSession(t *testing.T) {
	o := Origin{"alice", "1", 5, "IN", "IP4", "198.18.1.1", netip.MustParseAddr("198.18.1.1")}
	next := o
	next.Version++
	if !o.SameSession(next) {
		t.Error("a new version is the same session")
	}
	for _, change := range []func(*Origin){
		func(p *Origin) { p.Username = "bob" },
		func(p *Origin) { p.SessID = "2" },
		func(p *Origin) { p.Address, p.Addr = "198.18.1.2", netip.MustParseAddr("198.18.1.2") },
		func(p *Origin) { p.AddrType = "IP6" },
	} {
		p := o
		change(&p)
		if o.SameSession(p) {
			t.Errorf("%+v and %+v are not one session (RFC 4566 §5.2)", o, p)
		}
	}
}

// TestDirectionLevels: RFC 3264 §5.1 / RFC 4566 §6: a direction attribute
// at media level applies to its own stream and wins over the session
// level; the session level applies to streams that give none; sendrecv
// is the default. Another stream's attribute says nothing about audio, so
// the last direction line of the body is not the audio's direction.
func TestDirectionLevels(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  Direction
	}{
		{"none", []string{"m=audio 4000 RTP/AVP 0"}, SendRecv},
		{"session level only", []string{"a=sendonly", "m=audio 4000 RTP/AVP 0"}, SendOnly},
		{"media level wins", []string{"a=inactive", "m=audio 4000 RTP/AVP 0", "a=sendrecv"}, SendRecv},
		{"media level over session level", []string{"a=sendrecv", "m=audio 4000 RTP/AVP 0", "a=recvonly"}, RecvOnly},
		{"a later video stream's direction", []string{"m=audio 4000 RTP/AVP 0", "m=video 4002 RTP/AVP 96", "a=inactive"}, SendRecv},
		{"a later video stream's direction, session level too",
			[]string{"a=sendonly", "m=audio 4000 RTP/AVP 0", "m=video 4002 RTP/AVP 96", "a=sendrecv"}, SendOnly},
		{"an earlier video stream's direction", []string{"m=video 4002 RTP/AVP 96", "a=sendonly", "m=audio 4000 RTP/AVP 0"}, SendRecv},
		{"a second audio stream's direction", []string{"m=audio 4000 RTP/AVP 0", "m=audio 4002 RTP/AVP 0", "a=inactive"}, SendRecv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := append([]string{"v=0", "o=x 1 1 IN IP4 198.18.1.1", "s=-", "c=IN IP4 198.18.1.1", "t=0 0"}, tt.lines...)
			s, err := Parse([]byte(sdpLines(lines...)))
			if err != nil {
				t.Fatal(err)
			}
			if s.Audio.Direction != tt.want {
				t.Errorf("Direction = %v, want %v", s.Audio.Direction, tt.want)
			}
		})
	}
}

func TestParseAny(t *testing.T) {
	video := sdpLines("v=0", "o=x 1 3 IN IP4 198.18.1.1", "s=-", "c=IN IP4 198.18.1.1", "t=0 0", "a=sendonly", "m=video 5000 RTP/AVP 96")
	badAudio := sdpLines("v=0", "o=x 1 3 IN IP4 198.18.1.1", "s=-", "t=0 0", "m=audio many RTP/AVP 0", "m=audio 4000 RTP/AVP 0")
	for _, in := range []string{video, badAudio} {
		s, err := ParseAny([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if s.HasAudio() || s.Audio.Port != 0 || s.Origin.Version != 3 {
			t.Errorf("ParseAny: audio %v %+v, origin %+v", s.HasAudio(), s.Audio, s.Origin)
		}
		if out := s.Rewrite(Params{Port: 1}); out != nil {
			t.Errorf("Rewrite without audio: %q", out)
		}
	}
	if _, err := Parse([]byte(video)); !errors.Is(err, ErrNoAudio) {
		t.Errorf("Parse(video only) = %v", err)
	}
	// Parse still refuses a malformed first audio m= line (the second one
	// is not taken instead).
	if _, err := Parse([]byte(badAudio)); err == nil || errors.Is(err, ErrNoAudio) {
		t.Errorf("Parse(bad audio m=) = %v", err)
	}
	for _, in := range []string{"", "\r\n", strings.Repeat("a=x\r\n", MaxSize/5+1)} {
		if _, err := ParseAny([]byte(in)); err == nil {
			t.Errorf("ParseAny(%.20q) accepted", in)
		}
	}
	if s, err := Parse([]byte(polycom)); err != nil || !s.HasAudio() {
		t.Errorf("Parse: HasAudio false, %v", err)
	}
}

func TestWithOrigin(t *testing.T) {
	in := "v=0\no=b 2 2 IN IP4 198.18.1.2\ns=-\nc=IN IP4 198.18.1.2\nt=0 0\nm=video 5000 RTP/AVP 96\na=x-keep:  two  blanks"
	s, err := ParseAny([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if out := s.WithOrigin(s.Origin); string(out) != in {
		t.Errorf("same origin changed the body:\n%s", out)
	}
	o := Origin{"a", "1", 7, "IN", "IP4", "pbx.example.com", netip.Addr{}}
	want := sdpLines("v=0", "o=a 1 7 IN IP4 pbx.example.com", "s=-", "c=IN IP4 198.18.1.2", "t=0 0", "m=video 5000 RTP/AVP 96", "a=x-keep:  two  blanks")
	if out := string(s.WithOrigin(o)); out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if back, err := ParseAny(s.WithOrigin(o)); err != nil || back.Origin != o {
		t.Errorf("re-parse: %+v, %v", back.Origin, err)
	}
	noO := "v=0\r\ns=-\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
	s, _ = ParseAny([]byte(noO))
	if out := string(s.WithOrigin(o)); out != noO {
		t.Errorf("no o= line: got\n%s", out)
	}
}

func TestWithSendRecv(t *testing.T) {
	held := "v=0\no=a 1 2 IN IP4 198.18.1.1\ns=-\nc=IN IP4 198.18.1.1\nt=0 0\na=recvonly\nm=audio 4000 RTP/AVP 0\na=sendonly\nm=video 5000 RTP/AVP 96\na=inactive\na=sendrecv"
	s, err := ParseAny([]byte(held))
	if err != nil {
		t.Fatal(err)
	}
	want := sdpLines("v=0", "o=a 1 2 IN IP4 198.18.1.1", "s=-", "c=IN IP4 198.18.1.1", "t=0 0", "a=sendrecv",
		"m=audio 4000 RTP/AVP 0", "a=sendrecv", "m=video 5000 RTP/AVP 96", "a=sendrecv", "a=sendrecv")
	out := s.WithSendRecv()
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if back, err := Parse(out); err != nil || back.Audio.Direction != SendRecv {
		t.Errorf("re-parse: %v", err)
	}
	// Nothing to change (no attribute, or sendrecv only): byte for byte.
	for _, in := range []string{"v=0\nm=audio 4000 RTP/AVP 0", polycom} {
		s, _ := ParseAny([]byte(in))
		if out := s.WithSendRecv(); string(out) != in {
			t.Errorf("changed:\n%s", out)
		}
	}
}
