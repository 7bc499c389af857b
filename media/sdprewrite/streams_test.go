package sdprewrite

import (
	"net/netip"
	"testing"

	pionsdp "github.com/pion/sdp/v3"
)

// A softphone's audio and video offer, bundled, with a data channel the
// box cannot relay.
var videoOffer = sdpLines(
	"v=0",
	"o=bob 7 7 IN IP4 198.18.1.40",
	"s=-",
	"c=IN IP4 198.18.1.40",
	"t=0 0",
	"a=group:BUNDLE a v",
	"m=audio 40000 RTP/AVP 0 101",
	"a=mid:a",
	"a=rtpmap:101 telephone-event/8000",
	"a=rtcp-mux",
	"m=video 40002 RTP/SAVPF 96 97",
	"a=mid:v",
	"a=rtpmap:96 VP8/90000",
	"a=rtpmap:97 H264/90000",
	"a=fmtp:97 profile-level-id=42e01f",
	"a=rtcp-fb:96 nack pli",
	"a=extmap:1 urn:ietf:params:rtp-hdrext:toffset",
	"a=ssrc:99 cname:bob",
	"a=rtcp:40003",
	"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:"+key30,
	"a=sendonly",
	"m=application 40004 UDP/DTLS/SCTP webrtc-datachannel",
	"a=mid:d",
	"c=IN IP4 198.18.1.41",
)

func TestSections(t *testing.T) {
	s, err := Parse([]byte(videoOffer))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Sections) != 3 || s.AudioIndex != 0 {
		t.Fatalf("sections %d, audio at %d", len(s.Sections), s.AudioIndex)
	}
	v := s.Sections[1]
	if v.Kind != "video" || v.Mid != "v" || v.Port != 40002 || v.Proto != "RTP/SAVPF" || v.RTCPPort != 40003 ||
		v.Direction != SendOnly || v.Addr != netip.MustParseAddr("198.18.1.40") || len(v.Crypto) != 1 || !v.Relayable() {
		t.Errorf("video section: %+v", v)
	}
	if len(v.Codecs) != 2 || !v.Codecs[0].Is("VP8") || v.Codecs[0].Rate != 90000 || v.Codecs[1].Fmtp != "profile-level-id=42e01f" {
		t.Errorf("video formats: %+v", v.Codecs)
	}
	d := s.Sections[2]
	if d.Kind != "application" || d.Relayable() || d.Addr != netip.MustParseAddr("198.18.1.41") {
		t.Errorf("data section: %+v", d)
	}
	// The audio section's attributes are its own, not the video's.
	if s.Audio.Direction != SendRecv || len(s.Audio.Crypto) != 0 || s.Audio.RTCPPort != 0 {
		t.Errorf("audio: %+v", s.Audio)
	}
	for _, tc := range []struct {
		m    string
		want bool
	}{
		{"m=video 0 RTP/AVP 96", false},
		{"m=video 5000 UDP/TLS/RTP/SAVPF 96", false},
		{"m=image 5000 udptl t38", false},
		{"m=text 5000 RTP/AVP 98", true},
		{"m=audio 5000 RTP/AVPF 0", true},
		{"m=video x RTP/AVP 96", false},
	} {
		p, _ := ParseAny([]byte(sdpLines("v=0", "c=IN IP4 198.18.1.1", "m=audio 4000 RTP/AVP 0", tc.m)))
		if got := p.Sections[1].Relayable(); got != tc.want {
			t.Errorf("%s: Relayable %v", tc.m, got)
		}
	}
}

func TestRewriteStreams(t *testing.T) {
	s, err := Parse([]byte(videoOffer))
	if err != nil {
		t.Fatal(err)
	}
	box := netip.MustParseAddr("198.18.2.1")
	own := Crypto{Tag: 1, Suite: "AES_CM_128_HMAC_SHA1_80", Key: make([]byte, 30)}
	out := s.Rewrite(Params{
		Origin: Origin{Username: "outpost", SessID: "5", Version: 1}, Addr: box, Port: 30000,
		Codecs: []Codec{{PT: 0, Name: "PCMU", Rate: 8000}}, Direction: SendRecv,
		Streams: map[int]Stream{1: {Port: 30002, Proto: "RTP/AVPF", Direction: RecvOnly}, 2: {Port: 30004}},
	})
	want := sdpLines(
		"v=0",
		"o=outpost 5 1 IN IP4 198.18.2.1",
		"s=-",
		"c=IN IP4 198.18.2.1",
		"t=0 0",
		"m=audio 30000 RTP/AVP 0",
		"a=mid:a",
		"a=rtpmap:0 PCMU/8000",
		"a=sendrecv",
		"m=video 30002 RTP/AVPF 96 97",
		"a=mid:v",
		"a=rtpmap:96 VP8/90000",
		"a=rtpmap:97 H264/90000",
		"a=fmtp:97 profile-level-id=42e01f",
		"a=rtcp-fb:96 nack pli",
		"a=extmap:1 urn:ietf:params:rtp-hdrext:toffset",
		"a=rtcp:30003 IN IP4 198.18.2.1",
		"a=recvonly",
		// Not relayable, so rejected although the caller asked.
		"m=application 0 UDP/DTLS/SCTP webrtc-datachannel",
		"a=mid:d",
		"c=IN IP4 198.18.2.1",
	)
	if string(out) != want {
		t.Errorf("rewrite:\n%s\nwant:\n%s", out, want)
	}
	var sd pionsdp.SessionDescription
	if err := sd.Unmarshal(out); err != nil {
		t.Errorf("pion/sdp rejects the rewritten SDP: %v", err)
	}
	// Keys are per hop: the box's line replaces the sender's.
	out = s.Rewrite(Params{Addr: box, Port: 30000, Codecs: s.Audio.Codecs,
		Streams: map[int]Stream{1: {Port: 30002, Direction: SendRecv, Crypto: []Crypto{own}}}})
	back, _ := Parse(out)
	v := back.Sections[1]
	if v.Port != 30002 || v.Proto != "RTP/SAVPF" || len(v.Crypto) != 1 || v.Crypto[0].Line() != own.Line() || v.CryptoLines != 1 {
		t.Errorf("video with the box's key: %+v\n%s", v, out)
	}
	// Without an entry the stream is rejected, its lines kept.
	back, _ = Parse(s.Rewrite(Params{Addr: box, Port: 30000, Codecs: s.Audio.Codecs}))
	if v := back.Sections[1]; v.Port != 0 || v.CryptoLines != 1 || len(v.Codecs) != 2 {
		t.Errorf("rejected video: %+v", v)
	}
}
