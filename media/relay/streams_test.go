package relay

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/media/sdprewrite"
)

// withVideo appends a video section (H.264, PT 96, received on v's
// ports) and extra sections to an audio SDP.
func withVideo(sdp []byte, v *phone, extra ...string) []byte {
	s := string(sdp) + fmt.Sprintf("m=video %d RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=rtcp-fb:96 nack pli\r\n", v.addr().Port())
	for _, l := range extra {
		s += l + "\r\n"
	}
	return []byte(s)
}

// section returns section i of an SDP the relay wrote.
func section(t testing.TB, sdp []byte, i int) sdprewrite.Section {
	t.Helper()
	s, err := sdprewrite.Parse(sdp)
	if err != nil {
		t.Fatalf("relay wrote bad SDP: %v\n%s", err, sdp)
	}
	if i >= len(s.Sections) {
		t.Fatalf("no section %d in:\n%s", i, sdp)
	}
	return s.Sections[i]
}

func sectionAddr(sec sdprewrite.Section) netip.AddrPort {
	return netip.AddrPortFrom(sec.Addr, uint16(sec.Port))
}

// videoCall sets up audio and video between A (offerer: phone pa, video
// va) and B (pb, vb) and returns the session and the box's video
// addresses facing each leg. B answers with bAnswerVideo (nil: like A's).
func videoCall(t *testing.T, r *Relay, pa, va, pb, vb *phone, sc SessionConfig) (*Session, netip.AddrPort, netip.AddrPort, []byte, []byte) {
	t.Helper()
	sc.ID, sc.LocalA, sc.LocalB = t.Name(), boxA, boxB
	s, err := r.NewSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	toB, err := s.Offer(A, withVideo(pa.sdp(1, []string{"0 PCMU"}), va, "m=image 9 udptl t38"))
	if err != nil {
		t.Fatal(err)
	}
	vB := section(t, toB, 1)
	if vB.Kind != "video" || vB.Port == 0 || vB.Addr != boxB || len(vB.Codecs) != 1 || !vB.Codecs[0].Is("H264") {
		t.Fatalf("video offered to B: %+v\n%s", vB, toB)
	}
	if img := section(t, toB, 2); img.Kind != "image" || img.Port != 0 {
		t.Fatalf("T.38 offered to B: %+v\n%s", img, toB)
	}
	if !strings.Contains(string(toB), "a=rtcp-fb:96 nack pli") {
		t.Errorf("the video's feedback was not passed:\n%s", toB)
	}
	toA, err := s.Answer(B, withVideo(pb.sdp(1, []string{"0 PCMU"}), vb, "m=image 0 udptl t38"))
	if err != nil {
		t.Fatal(err)
	}
	vA := section(t, toA, 1)
	if vA.Port == 0 || vA.Addr != boxA || vA.Direction != sdprewrite.SendRecv {
		t.Fatalf("video answered to A: %+v\n%s", vA, toA)
	}
	return s, sectionAddr(vA), sectionAddr(vB), toA, toB
}

// TestVideoRelayed: a call offering audio, video and T.38 keeps audio
// and video, each anchored on ports of its own, and rejects T.38 with
// port 0. Video passes byte for byte both ways, with its payload types
// and SSRCs (two interleaved, as with RFC 4588 retransmission), and its
// RTCP; each stream is counted apart.
func TestVideoRelayed(t *testing.T) {
	r := newRelay(t, Config{})
	pa, va, pb, vb := newPhone(t, phoneA), newPhone(t, phoneA), newPhone(t, phoneB), newPhone(t, phoneB)
	s, toBoxA, toBoxB, toA, _ := videoCall(t, r, pa, va, pb, vb, SessionConfig{})
	if audio := addrOf(mediaOf(t, toA)); audio == toBoxA {
		t.Fatalf("audio and video share %v", audio)
	}
	if n := r.PortsInUse(); n != 8 { // audio and video, a pair per leg each
		t.Errorf("ports in use %d, want 8", n)
	}
	frame := bytes.Repeat([]byte{0x65}, 1000)
	for i := range 10 {
		pkt := va.packet(96, frame)
		if i%2 == 1 { // the retransmission stream: another SSRC
			pkt[8] ^= 0xFF
		}
		if _, err := va.rtp.WriteToUDPAddrPort(pkt, toBoxA); err != nil {
			t.Fatal(err)
		}
		got, err := recvRaw(t, vb, 5*time.Second)
		if err != nil {
			t.Fatalf("video packet %d: %v", i, err)
		}
		if !bytes.Equal(got, pkt) {
			t.Fatalf("video packet %d changed on the way", i)
		}
	}
	vb.send(toBoxB, 96, frame)
	if p := va.recv(); p.pt != 96 || p.ssrc != vb.ssrc {
		t.Errorf("video B→A: pt %d ssrc %#x", p.pt, p.ssrc)
	}
	// RTCP of the video (an RR from B) reaches A's video RTCP port.
	rr := []byte{0x81, 201, 0, 7, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if _, err := vb.rtcp.WriteToUDPAddrPort(rr, netip.AddrPortFrom(toBoxB.Addr(), toBoxB.Port()+1)); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 100)
	_ = va.rtcp.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _, err := va.rtcp.ReadFromUDPAddrPort(b); err != nil || n != len(rr) {
		t.Fatalf("video RTCP: %d bytes, %v", n, err)
	}
	// Audio still flows on its own ports.
	pa.send(addrOf(mediaOf(t, toA)), 0, make([]byte, 160))
	if p := pb.recv(); p.pt != 0 {
		t.Errorf("audio pt %d", p.pt)
	}
	st := s.Streams()
	if len(st) != 1 || st[0].Kind != "video" || st[0].Index != 1 {
		t.Fatalf("streams: %+v", st)
	}
	if st[0].Legs[A].Relayed != 10 || st[0].Legs[B].Relayed != 1 || st[0].Legs[B].RTCP != 1 || st[0].Legs[A].Port != int(toBoxA.Port()) {
		t.Errorf("video figures: %+v", st[0].Legs)
	}
	if a := s.Stats(); a[A].Relayed != 1 || a[B].Relayed != 0 {
		t.Errorf("audio figures count video: %+v", a)
	}
	if tot := r.Stats(); tot.Relayed[A] != 11 {
		t.Errorf("relay total A→B %d, want 11 (audio and video)", tot.Relayed[A])
	}
	final := s.Close()
	if got := s.Streams(); len(got) != 1 || got[0].Legs[A].Relayed != 10 || final[A].Relayed != 1 {
		t.Errorf("after close: %+v, %+v", got, final)
	}
	if n := r.PortsInUse(); n != 0 {
		t.Errorf("ports in use after close: %d", n)
	}
}

// TestVideoRejected: an answer that rejects the video (port 0) is
// answered to the offerer with port 0 and nothing is relayed on it; a
// re-offer that adds video to an audio call brings it up.
func TestVideoRejected(t *testing.T) {
	r := newRelay(t, Config{})
	pa, va, pb, vb := newPhone(t, phoneA), newPhone(t, phoneA), newPhone(t, phoneB), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toB, err := s.Offer(A, withVideo(pa.sdp(1, []string{"0 PCMU"}), va))
	if err != nil {
		t.Fatal(err)
	}
	rejected := strings.Replace(string(withVideo(pb.sdp(1, []string{"0 PCMU"}), vb)),
		fmt.Sprintf("m=video %d", vb.addr().Port()), "m=video 0", 1)
	toA, err := s.Answer(B, []byte(rejected))
	if err != nil {
		t.Fatal(err)
	}
	if v := section(t, toA, 1); v.Port != 0 {
		t.Fatalf("video rejected by B answered to A with port %d:\n%s", v.Port, toA)
	}
	vb.send(sectionAddr(section(t, toB, 1)), 96, []byte{1})
	waitFor(t, "the rejected stream's packet", func() bool { return s.Streams()[0].Legs[B].Dropped == 1 })
	if _, err := va.tryRecv(50 * time.Millisecond); err == nil {
		t.Error("a rejected stream's packet reached A")
	}

	// Audio only, then a re-offer adds video.
	s2, err := r.NewSession(SessionConfig{ID: t.Name() + "-2", LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Offer(A, pa.sdp(1, []string{"0 PCMU"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Answer(B, pb.sdp(1, []string{"0 PCMU"})); err != nil {
		t.Fatal(err)
	}
	if len(s2.Streams()) != 0 {
		t.Fatal("an audio call has a video stream")
	}
	toB, err = s2.Offer(A, withVideo(pa.sdp(2, []string{"0 PCMU"}), va))
	if err != nil {
		t.Fatal(err)
	}
	toA, err = s2.Answer(B, withVideo(pb.sdp(2, []string{"0 PCMU"}), vb))
	if err != nil {
		t.Fatal(err)
	}
	va.send(sectionAddr(section(t, toA, 1)), 96, []byte{2})
	if p := vb.recv(); p.pt != 96 || p.payload[0] != 2 {
		t.Errorf("video added by re-offer: %+v", p)
	}
	if v := section(t, toB, 1); v.Port == 0 {
		t.Error("the re-offer's video was not offered to B")
	}
}

// TestVideoDirections: a video section's direction stops exactly the
// direction it names, independently of the audio.
func TestVideoDirections(t *testing.T) {
	r := newRelay(t, Config{})
	pa, va, pb, vb := newPhone(t, phoneA), newPhone(t, phoneA), newPhone(t, phoneB), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A only receives video (no camera).
	toB, err := s.Offer(A, withVideo(pa.sdp(1, []string{"0 PCMU"}), va, "a=recvonly"))
	if err != nil {
		t.Fatal(err)
	}
	if v := section(t, toB, 1); v.Direction != sdprewrite.RecvOnly {
		t.Fatalf("offered to B as %v", v.Direction)
	}
	toA, err := s.Answer(B, withVideo(pb.sdp(1, []string{"0 PCMU"}), vb, "a=sendonly"))
	if err != nil {
		t.Fatal(err)
	}
	if v := section(t, toA, 1); v.Direction != sdprewrite.SendOnly {
		t.Fatalf("answered to A as %v", v.Direction)
	}
	if m := mediaOf(t, toA); m.Direction != sdprewrite.SendRecv {
		t.Errorf("audio direction %v", m.Direction)
	}
	vb.send(sectionAddr(section(t, toB, 1)), 96, []byte{1})
	if p := va.recv(); p.payload[0] != 1 {
		t.Errorf("B→A video: %+v", p)
	}
	va.send(sectionAddr(section(t, toA, 1)), 96, []byte{2})
	waitFor(t, "A's video refused by the direction", func() bool { return s.Streams()[0].Legs[A].Dropped == 1 })
}

// TestVideoSRTPPerLeg: the video stream gets keys of its own per leg
// like the audio: a plain phone on A, an SRTP peer on B.
func TestVideoSRTPPerLeg(t *testing.T) {
	r := newRelay(t, Config{})
	pa, va, pb, vb := newPhone(t, phoneA), newPhone(t, phoneA), newPhone(t, phoneB), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB, SRTP: [2]SRTPPolicy{SRTPOff, SRTPRequire}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toB, err := s.Offer(A, withVideo(pa.sdp(1, []string{"0 PCMU"}), va))
	if err != nil {
		t.Fatal(err)
	}
	audio, video := mediaOf(t, toB), section(t, toB, 1)
	if video.Proto != "RTP/SAVP" || len(video.Crypto) != len(sdprewrite.Suites) || video.Crypto[0].Line() == audio.Crypto[0].Line() {
		t.Fatalf("video offered to the SRTP leg: %+v\n%s", video, toB)
	}
	sa := newSRTPPeer(t, pb, 1, video.Crypto[0].Suite)
	sv := newSRTPPeer(t, vb, 1, video.Crypto[0].Suite)
	sv.crypto.Key[0] ^= 0x55 // another key than the audio's
	sv.tx = pionContext(t, sv.crypto.Suite, sv.crypto.Key)
	ans := savp(pb.sdp(1, []string{"0 PCMU"}), sa.crypto)
	ans = append(ans, []byte(fmt.Sprintf("m=video %d RTP/SAVP 96\r\na=rtpmap:96 H264/90000\r\na=crypto:%s\r\n", vb.addr().Port(), sv.crypto.Line()))...)
	toA, err := s.Answer(B, ans)
	if err != nil {
		t.Fatal(err)
	}
	if v := section(t, toA, 1); v.Proto != "RTP/AVP" || v.CryptoLines != 0 || v.Port == 0 {
		t.Fatalf("video answered to the plain leg: %+v\n%s", v, toA)
	}
	if _, err := vb.rtp.WriteToUDPAddrPort(sv.sendSRTP(96, []byte("frame"), false), sectionAddr(video)); err != nil {
		t.Fatal(err)
	}
	if p := va.recv(); string(p.payload) != "frame" {
		t.Fatalf("decrypted video %q", p.payload)
	}
	if _, err := vb.rtp.WriteToUDPAddrPort(sv.sendSRTP(96, []byte("frame"), true), sectionAddr(video)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tampered video packet", func() bool { return s.Streams()[0].Legs[B].SRTPAuthFailures == 1 })
	// A's video reaches B encrypted with the box's video key.
	sv.rx = pionContext(t, video.Crypto[0].Suite, video.Crypto[0].Key)
	va.send(sectionAddr(section(t, toA, 1)), 96, []byte("back"))
	raw, err := recvRaw(t, vb, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := sv.rx.DecryptRTP(nil, raw, nil)
	if err != nil || !bytes.HasSuffix(dec, []byte("back")) {
		t.Fatalf("B's video does not decrypt with the box's video key: %v", err)
	}
	if st := s.Streams()[0].Legs; st[B].SRTP == "" || st[A].SRTP != "" {
		t.Errorf("SRTP per leg: %+v", st)
	}

	// A plain answer for the video on a leg that requires SRTP rejects
	// the video only.
	s2, err := r.NewSession(SessionConfig{ID: t.Name() + "-2", LocalA: boxA, LocalB: boxB, SRTP: [2]SRTPPolicy{SRTPOff, SRTPRequire}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Offer(A, withVideo(pa.sdp(1, []string{"0 PCMU"}), va)); err != nil {
		t.Fatal(err)
	}
	ans = savp(pb.sdp(1, []string{"0 PCMU"}), sa.crypto)
	ans = append(ans, []byte(fmt.Sprintf("m=video %d RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n", vb.addr().Port()))...)
	toA, err = s2.Answer(B, ans)
	if err != nil {
		t.Fatalf("the call failed for its video: %v", err)
	}
	if v := section(t, toA, 1); v.Port != 0 {
		t.Errorf("plain video on an SRTP-only leg answered with port %d", v.Port)
	}
}

// TestStreamLimit: beyond MaxStreams sections besides the audio, the
// rest are rejected with port 0.
func TestStreamLimit(t *testing.T) {
	r := newRelay(t, Config{})
	pa, va := newPhone(t, phoneA), newPhone(t, phoneA)
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	offer := pa.sdp(1, []string{"0 PCMU"})
	for range MaxStreams + 2 {
		offer = withVideo(offer, va)
	}
	toB, err := s.Offer(A, offer)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= MaxStreams+2; i++ {
		if got, want := section(t, toB, i).Port != 0, i <= MaxStreams; got != want {
			t.Errorf("section %d relayed %v, want %v", i, got, want)
		}
	}
}

// TestBundleDeclined: a bundled offer (RFC 8843: a=group:BUNDLE, a=mid,
// a bundle-only section with port 0) is offered on unbundled, each stream
// on ports of its own with its a=mid, and the bundle-only one rejected.
func TestBundleDeclined(t *testing.T) {
	r := newRelay(t, Config{})
	pa, va, pb, vb := newPhone(t, phoneA), newPhone(t, phoneA), newPhone(t, phoneB), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	offer := strings.Replace(string(withVideo(pa.sdp(1, []string{"0 PCMU"}, "a=mid:a"), va, "a=mid:v", "m=video 0 RTP/AVP 96", "a=mid:v2", "a=bundle-only")),
		"t=0 0\r\n", "t=0 0\r\na=group:BUNDLE a v v2\r\n", 1)
	toB, err := s.Offer(A, []byte(offer))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(toB), "a=group") {
		t.Errorf("the box offered a bundle it does not make:\n%s", toB)
	}
	a, v, v2 := mediaOf(t, toB), section(t, toB, 1), section(t, toB, 2)
	if v.Port == 0 || v.Port == a.Port || v.Mid != "v" || section(t, toB, 0).Mid != "a" || v2.Port != 0 {
		t.Fatalf("unbundled offer: audio %d, video %+v, bundle-only %+v\n%s", a.Port, v, v2, toB)
	}
	toA, err := s.Answer(B, withVideo(pb.sdp(1, []string{"0 PCMU"}, "a=mid:a"), vb, "a=mid:v", "m=video 0 RTP/AVP 96", "a=mid:v2"))
	if err != nil {
		t.Fatal(err)
	}
	if v := section(t, toA, 1); v.Port == 0 || v.Port == mediaOf(t, toA).Port || strings.Contains(string(toA), "a=group") {
		t.Errorf("unbundled answer:\n%s", toA)
	}
}

// videoLegA sets up audio and H.264 video between two phones and returns
// the forwarder of the video from leg A and A's video source address.
func videoLegA(t testing.TB) (*forwarder, netip.AddrPort) {
	t.Helper()
	r := newRelay(t, Config{})
	pa, va, pb, vb := newPhone(t, phoneA), newPhone(t, phoneA), newPhone(t, phoneB), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: "video", LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Offer(A, withVideo(pa.sdp(1, []string{"0 PCMU"}), va)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(B, withVideo(pb.sdp(1, []string{"0 PCMU"}), vb)); err != nil {
		t.Fatal(err)
	}
	return &s.streams[1].fwd[A], va.addr()
}
