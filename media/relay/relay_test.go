package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/media/g711"
	"github.com/outpost/outpost/media/sdprewrite"
)

func TestConfig(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil || c.PortMin != DefaultPortMin || c.PortMax != DefaultPortMax || c.Latching != LatchSignalled ||
		c.LatchPackets != DefaultLatchPackets || len(c.Codecs) != 3 || c.InactivityTimeout != 0 {
		t.Errorf("defaults: %+v %v", c, err)
	}
	if c, _ := (Config{PortMin: 20001, PortMax: 20010}).withDefaults(); c.PortMin != 20002 {
		t.Errorf("odd PortMin not rounded up: %d", c.PortMin)
	}
	for _, bad := range []Config{
		{PortMin: 100, PortMax: 2000},
		{PortMin: 30000, PortMax: 30000},
		{PortMin: 30000, PortMax: 70000},
		{Latching: "whatever"},
		{Codecs: []string{"PCMU/8000"}},
		{InactivityTimeout: -time.Second},
	} {
		if _, err := New(bad, nil); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
	r, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reconfigure(Config{PortMin: 30000, PortMax: 30100, Codecs: []string{"PCMA"}}); err != nil {
		t.Fatal(err)
	}
	if got := r.Config(); got.PortMin != 30000 || got.Codecs[0] != "PCMA" {
		t.Errorf("after Reconfigure: %+v", got)
	}
	if err := r.Reconfigure(Config{Latching: "x"}); err == nil || r.Config().PortMin != 30000 {
		t.Errorf("bad Reconfigure: %v, config %+v", err, r.Config())
	}
}

// A µ-law phone calls an A-law-only gateway: the relay offers both laws,
// the gateway picks A-law, and the relay transcodes each packet.
func TestTranscodeUlawToAlaw(t *testing.T) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: "transcode", LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toB, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU", "101 telephone-event"}, "a=fmtp:101 0-16", "a=ptime:20"))
	if err != nil {
		t.Fatal(err)
	}
	mb := mediaOf(t, toB)
	if got := names(mb.Codecs); strings.Join(got, ",") != "PCMU,PCMA,telephone-event" {
		t.Fatalf("offer to B has %v", got)
	}
	if mb.Addr != boxB || mb.Port%2 != 0 || mb.Ptime != 20 {
		t.Errorf("offer to B: %v:%d ptime %d", mb.Addr, mb.Port, mb.Ptime)
	}
	if te, _ := sdprewrite.Find(mb.Codecs, "telephone-event"); te.PT != 101 || te.Fmtp != "0-16" {
		t.Errorf("telephone-event offered as %+v", te)
	}
	// The gateway answers A-law with its own telephone-event number.
	toA, err := s.Answer(B, pb.sdp(1, []string{"8 PCMA", "96 telephone-event"}))
	if err != nil {
		t.Fatal(err)
	}
	ma := mediaOf(t, toA)
	if got := names(ma.Codecs); strings.Join(got, ",") != "PCMU,telephone-event" || ma.Codecs[0].PT != 0 || ma.Codecs[1].PT != 101 {
		t.Fatalf("answer to A has %+v", ma.Codecs)
	}
	if ma.Addr != boxA {
		t.Errorf("answer to A announces %v, want %v", ma.Addr, boxA)
	}

	// A → B: a 1 kHz tone in µ-law arrives as A-law from the box's B side.
	pcm := make([]int16, 160)
	for i := range pcm {
		pcm[i] = int16(10000 * math.Sin(2*math.Pi*1000*float64(i)/8000))
	}
	pa.send(addrOf(ma), 0, g711.Encode(nil, pcm, g711.Ulaw))
	got := pb.recv()
	if got.from != addrOf(mb) {
		t.Errorf("B got RTP from %v, want the box's B side %v", got.from, addrOf(mb))
	}
	if got.pt != 8 || got.ssrc != pa.ssrc {
		t.Errorf("B got pt %d ssrc %#x", got.pt, got.ssrc)
	}
	dec := g711.Decode(nil, got.payload, g711.Alaw)
	if len(dec) != len(pcm) {
		t.Fatalf("payload %d samples", len(dec))
	}
	for i := range pcm {
		// Two quantisations (µ-law, then the law conversion): within
		// about 1/8 of the magnitude plus the smallest steps.
		if d := math.Abs(float64(dec[i]) - float64(pcm[i])); d > math.Abs(float64(pcm[i]))/8+64 {
			t.Errorf("sample %d: sent %d, B decoded %d", i, pcm[i], dec[i])
		}
	}
	// B → A: A-law becomes µ-law, from the box's A side.
	pb.send(addrOf(mb), 8, g711.Encode(nil, pcm, g711.Alaw))
	back := pa.recv()
	if back.from != addrOf(ma) || back.pt != 0 {
		t.Errorf("A got pt %d from %v, want 0 from %v", back.pt, back.from, addrOf(ma))
	}
	for i, v := range g711.Decode(nil, back.payload, g711.Ulaw) {
		if d := math.Abs(float64(v) - float64(pcm[i])); d > math.Abs(float64(pcm[i]))/8+64 {
			t.Errorf("sample %d: sent %d, A decoded %d", i, pcm[i], v)
		}
	}
	// telephone-event: 101 from A becomes 96 toward B, payload untouched.
	ev := []byte{5, 0x8a, 0, 160}
	pa.send(addrOf(ma), 101, ev)
	if got := pb.recv(); got.pt != 96 || string(got.payload) != string(ev) {
		t.Errorf("telephone-event at B: pt %d payload %x", got.pt, got.payload)
	}
	pb.send(addrOf(mb), 96, ev)
	if got := pa.recv(); got.pt != 101 || string(got.payload) != string(ev) {
		t.Errorf("telephone-event at A: pt %d payload %x", got.pt, got.payload)
	}
	st := s.Stats()
	if st[A].Packets != 2 || st[B].Packets != 2 || st[A].Relayed != 2 || st[A].Port != ma.Port || st[B].Port != mb.Port {
		t.Errorf("stats %+v", st)
	}
}

func TestSameCodecPassesThrough(t *testing.T) {
	r := newRelay(t, Config{Codecs: []string{"PCMA", "PCMU"}})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: "same", LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toB, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU", "8 PCMA", "18 G729"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(mediaOf(t, toB).Codecs); strings.Join(got, ",") != "PCMA,PCMU" {
		t.Errorf("offer to B = %v, want the allowed list's order without G729", got)
	}
	toA, err := s.Answer(B, pb.sdp(1, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("0123456789abcdef")
	pa.send(addrOf(mediaOf(t, toA)), 0, payload)
	if got := pb.recv(); got.pt != 0 || string(got.payload) != string(payload) {
		t.Errorf("B got pt %d %q", got.pt, got.payload)
	}
}

// TestIPv6: a session on IPv6 addresses binds its ports there (raw
// descriptors for the pollers) and relays both ways.
func TestIPv6(t *testing.T) {
	lo := netip.IPv6Loopback()
	if c, err := net.ListenUDP("udp6", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0))); err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	} else {
		c.Close()
	}
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, lo), newPhone(t, lo)
	s, err := r.NewSession(SessionConfig{ID: "v6", LocalA: lo, LocalB: lo})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toB, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	toA, err := s.Answer(B, pb.sdp(1, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	boxForA, boxForB := addrOf(mediaOf(t, toA)), addrOf(mediaOf(t, toB))
	if boxForA.Addr() != lo || boxForB.Addr() != lo || boxForA == boxForB {
		t.Fatalf("box addresses %v (A) and %v (B)", boxForA, boxForB)
	}
	pa.send(boxForA, 0, []byte("from A"))
	if got := pb.recv(); string(got.payload) != "from A" || got.from != boxForB {
		t.Errorf("B got %q from %v", got.payload, got.from)
	}
	pb.send(boxForB, 0, []byte("from B"))
	if got := pa.recv(); string(got.payload) != "from B" || got.from != boxForA {
		t.Errorf("A got %q from %v", got.payload, got.from)
	}
}

func TestNotAcceptable(t *testing.T) {
	r := newRelay(t, Config{Codecs: []string{"PCMU", "telephone-event"}})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: "488", LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, sdp := range map[string][]byte{
		"G729 only":       pa.sdp(1, []string{"18 G729", "101 telephone-event"}),
		"A-law only":      pa.sdp(1, []string{"8 PCMA"}), // PCMA not allowed: no transcoding either
		"not SDP":         []byte("hello"),
		"SRTP":            []byte(strings.Replace(string(pa.sdp(1, []string{"0 PCMU"})), "RTP/AVP", "RTP/SAVP", 1)),
		"rejected stream": []byte(strings.Replace(string(pa.sdp(1, []string{"0 PCMU"})), "m=audio "+itoa(int(pa.addr().Port())), "m=audio 0", 1)),
	} {
		if _, err := s.Offer(A, sdp); !errors.Is(err, ErrNotAcceptable) {
			t.Errorf("%s: Offer = %v, want ErrNotAcceptable", name, err)
		}
	}
	if n := r.PortsInUse(); n != 0 {
		t.Errorf("refused offers bound %d ports", n)
	}
	if _, err := s.Answer(B, pb.sdp(1, []string{"0 PCMU"})); !errors.Is(err, ErrNoOffer) {
		t.Errorf("Answer without offer = %v", err)
	}
	if _, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(A, pa.sdp(1, []string{"0 PCMU"})); !errors.Is(err, ErrNoOffer) {
		t.Errorf("Answer from the offerer = %v", err)
	}
	if _, err := s.Answer(B, pb.sdp(1, []string{"8 PCMA"})); !errors.Is(err, ErrNotAcceptable) {
		t.Errorf("Answer with a codec not offered = %v", err)
	}
	if _, err := s.Offer(7, nil); err == nil {
		t.Error("Offer from leg 7 accepted")
	}
	// The B2BUA's view, without importing this package.
	var st interface{ SIPStatus() int }
	_, err = s.Offer(A, pa.sdp(1, []string{"18 G729"}))
	if !errors.As(err, &st) || st.SIPStatus() != 488 {
		t.Errorf("Offer error %v does not carry 488", err)
	}
	// Session satisfies an interface declared with plain types.
	var _ interface {
		Offer(from int, sdp []byte) ([]byte, error)
		Answer(from int, sdp []byte) ([]byte, error)
		Release()
	} = s
}

func itoa(n int) string { return strconv.Itoa(n) }

// Hold (sendonly from A, recvonly back) stops B → A and keeps A → B
// (music on hold); resume restores both; o= versions grow only on change.
func TestHoldResume(t *testing.T) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, toBoxA, toBoxB := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	pa.send(toBoxA, 0, []byte{1})
	pb.recv()
	pb.send(toBoxB, 0, []byte{2})
	pa.recv()

	holdOffer, err := s.Offer(A, pa.sdp(2, []string{"0 PCMU"}, "a=sendonly"))
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := sdprewrite.Parse(holdOffer)
	if hs.Audio.Direction != sdprewrite.SendOnly || hs.Origin.Version != 2 {
		t.Errorf("hold offer to B: direction %v, o= version %d (want sendonly, 2)", hs.Audio.Direction, hs.Origin.Version)
	}
	holdAnswer, err := s.Answer(B, pb.sdp(2, []string{"0 PCMU"}, "a=recvonly"))
	if err != nil {
		t.Fatal(err)
	}
	if ha, _ := sdprewrite.Parse(holdAnswer); ha.Audio.Direction != sdprewrite.RecvOnly || ha.Origin.Version != 2 {
		t.Errorf("hold answer to A: direction %v version %d", ha.Audio.Direction, ha.Origin.Version)
	}
	// B's packets are now dropped by the relay (counted, not sent) ...
	dropped := s.Stats()[B].Dropped
	for range 5 {
		pb.send(toBoxB, 0, []byte{3})
	}
	waitFor(t, "5 dropped packets from B", func() bool { return s.Stats()[B].Dropped == dropped+5 })
	// ... while A's still reach B.
	pa.send(toBoxA, 0, []byte{4})
	if got := pb.recv(); got.payload[0] != 4 {
		t.Errorf("B got %v during hold", got.payload)
	}
	// The same hold SDP again changes nothing: same o= version.
	again, _ := s.Offer(A, pa.sdp(2, []string{"0 PCMU"}, "a=sendonly"))
	if a, _ := sdprewrite.Parse(again); a.Origin.Version != 2 {
		t.Errorf("unchanged re-offer got version %d", a.Origin.Version)
	}
	// Resume.
	resume, err := s.Offer(A, pa.sdp(3, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	if rs, _ := sdprewrite.Parse(resume); rs.Audio.Direction != sdprewrite.SendRecv || rs.Origin.Version != 3 {
		t.Errorf("resume offer: %v version %d", rs.Audio.Direction, rs.Origin.Version)
	}
	if _, err := s.Answer(B, pb.sdp(3, []string{"0 PCMU"})); err != nil {
		t.Fatal(err)
	}
	pb.send(toBoxB, 0, []byte{5})
	// The first packet A sees since the hold is the one sent after resume:
	// nothing sent during the hold leaked.
	if got := pa.recv(); got.payload[0] != 5 {
		t.Errorf("A got %v after resume, want the post-resume packet", got.payload)
	}
}

// A re-INVITE moves leg A to another device with another SSRC: B keeps
// seeing one stream (same SSRC, next sequence number, timestamp +1 frame,
// marker set).
func TestSSRCContinuityAcrossReinvite(t *testing.T) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, toBoxA, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	payload := make([]byte, 160)
	pa.seq, pa.ts = 100, 16000
	var last rtpPacket
	for range 3 {
		pa.send(toBoxA, 0, payload)
		last = pb.recv()
	}
	if last.ssrc != pa.ssrc || last.seq != 102 {
		t.Fatalf("before: ssrc %#x seq %d", last.ssrc, last.seq)
	}
	pa2 := newPhone(t, phoneA)
	pa2.seq, pa2.ts = 50000, 999999
	if _, err := s.Offer(A, pa2.sdp(2, []string{"0 PCMU"})); err != nil {
		t.Fatal(err)
	}
	toA, err := s.Answer(B, pb.sdp(1, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	// The box's A side is unchanged by the re-INVITE.
	if got := addrOf(mediaOf(t, toA)); got != toBoxA {
		t.Errorf("A side moved from %v to %v", toBoxA, got)
	}
	// The old device is no longer the signalled source: refused.
	refused := s.Stats()[A].Refused
	pa.send(toBoxA, 0, payload)
	waitFor(t, "old device refused", func() bool { return s.Stats()[A].Refused == refused+1 })
	pa2.send(toBoxA, 0, payload)
	got := pb.recv()
	if got.ssrc != pa.ssrc || got.seq != 103 || got.ts != 16000+3*160 || !got.marker {
		t.Errorf("after re-INVITE: ssrc %#x seq %d ts %d marker %v; want %#x 103 %d true", got.ssrc, got.seq, got.ts, got.marker, pa.ssrc, 16000+3*160)
	}
	pa2.send(toBoxA, 0, payload)
	if got := pb.recv(); got.seq != 104 || got.ts != 16000+4*160 || got.marker {
		t.Errorf("next: seq %d ts %d marker %v", got.seq, got.ts, got.marker)
	}
}

func TestLatchingSignalledRefusesStranger(t *testing.T) {
	r := newRelay(t, Config{Latching: LatchSignalled})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, toBoxA, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	stranger := newPhone(t, netip.MustParseAddr("127.0.0.66"))
	for range 10 {
		stranger.send(toBoxA, 0, []byte("evil"))
	}
	waitFor(t, "10 refused packets", func() bool { return s.Stats()[A].Refused == 10 })
	pa.send(toBoxA, 0, []byte("good"))
	if got := pb.recv(); string(got.payload) != "good" {
		t.Errorf("B got %q first, want the phone's packet", got.payload)
	}
	if st := s.Stats()[A]; st.Packets != 1 || st.Relayed != 1 {
		t.Errorf("stats %+v", st)
	}
}

// With first-packets latching a phone that sends from another port than
// it signalled (NAT) is followed, and then locked: a stranger after the
// lock is refused and cannot redirect B's media.
func TestLatchingFirstPackets(t *testing.T) {
	r := newRelay(t, Config{Latching: LatchFirstPackets, LatchPackets: 3})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, toBoxA, toBoxB := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	natted := newPhone(t, phoneA) // A's real source: another port
	for i := range 3 {
		natted.send(toBoxA, 0, []byte{byte(i)})
		pb.recv()
	}
	stranger := newPhone(t, netip.MustParseAddr("127.0.0.66"))
	stranger.send(toBoxA, 0, []byte("evil"))
	waitFor(t, "stranger refused", func() bool { return s.Stats()[A].Refused == 1 })
	// B's media goes to the latched source, not to the signalled port.
	pb.send(toBoxB, 0, []byte("to A"))
	got, err := natted.tryRecv(5 * time.Second)
	if err != nil || string(got.payload) != "to A" {
		t.Errorf("latched source got %q, %v", got.payload, err)
	}
}

func TestRTCPRelayed(t *testing.T) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	_, toBoxA, toBoxB := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	rr := make([]byte, 8) // empty receiver report
	rr[0], rr[1] = 0x80, 201
	binary.BigEndian.PutUint16(rr[2:], 1)
	binary.BigEndian.PutUint32(rr[4:], pa.ssrc)
	if _, err := pa.rtcp.WriteToUDPAddrPort(rr, netip.AddrPortFrom(toBoxA.Addr(), toBoxA.Port()+1)); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 100)
	_ = pb.rtcp.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := pb.rtcp.ReadFromUDPAddrPort(b)
	if err != nil || n != 8 || b[1] != 201 {
		t.Fatalf("B's RTCP: %d %x %v", n, b[:n], err)
	}
	if want := netip.AddrPortFrom(toBoxB.Addr(), toBoxB.Port()+1); from != want {
		t.Errorf("RTCP from %v, want %v", from, want)
	}
}

// A silent leg makes OnInactive fire once, with the leg in the reason.
func TestInactivity(t *testing.T) {
	r := newRelay(t, Config{InactivityTimeout: 300 * time.Millisecond})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	reasons := make(chan string, 4)
	s, err := r.NewSession(SessionConfig{ID: "quiet", LocalA: boxA, LocalB: boxB, OnInactive: func(r string) { reasons <- r }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toB, _ := s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
	toA, err := s.Answer(B, pb.sdp(1, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	_ = toB
	stop := pacer(t, pa, addrOf(mediaOf(t, toA)), 0) // A talks, B is silent
	defer stop()
	select {
	case reason := <-reasons:
		if !strings.Contains(reason, "leg B") {
			t.Errorf("reason %q does not name leg B", reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnInactive not called")
	}
	stop()
	s.Close()
	select {
	case again := <-reasons:
		t.Errorf("OnInactive called twice: %q", again)
	default:
	}
}

// The inactivity rule itself, with synthetic times: hold pauses it,
// resume restarts the clock, a talking leg keeps it quiet.
func TestInactivityRule(t *testing.T) {
	r, err := New(Config{PortMin: testPortMin, PortMax: testPortMax, InactivityTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.shutdown()
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if _, fired := s.checkInactive(at(0)); fired {
		t.Fatal("fired at once")
	}
	s.io[A].rtpIn.Add(10)
	s.io[B].rtpIn.Add(10)
	if _, fired := s.checkInactive(at(900 * time.Millisecond)); fired {
		t.Fatal("fired while both legs talk")
	}
	// Hold: no RTP from anyone for a long time, no event.
	if _, err := s.Offer(A, pa.sdp(2, []string{"0 PCMU"}, "a=inactive")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(B, pb.sdp(2, []string{"0 PCMU"}, "a=inactive")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{2, 10, 60} {
		if reason, fired := s.checkInactive(at(d * time.Second)); fired {
			t.Fatalf("fired on hold at %ds: %s", d, reason)
		}
	}
	// Resume: the clock starts again from the resume.
	s.Offer(A, pa.sdp(3, []string{"0 PCMU"}))
	s.Answer(B, pb.sdp(3, []string{"0 PCMU"}))
	if _, fired := s.checkInactive(at(61 * time.Second)); fired {
		t.Fatal("fired right after resume")
	}
	s.io[A].rtpIn.Add(1)
	if _, fired := s.checkInactive(at(61*time.Second + 900*time.Millisecond)); fired {
		t.Fatal("fired before the timeout")
	}
	s.io[A].rtpIn.Add(1)
	reason, fired := s.checkInactive(at(62*time.Second + 100*time.Millisecond))
	if !fired || !strings.Contains(reason, "leg B") {
		t.Fatalf("silent B: fired=%v reason=%q", fired, reason)
	}
	if _, again := s.checkInactive(at(70 * time.Second)); again {
		t.Error("fired twice")
	}
}

// 1000 sessions with traffic, created and closed in waves: no port stays
// bound, and the counters add up.
func TestNoPortLeak(t *testing.T) {
	const sessions, wave = 1000, 50
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	for w := 0; w < sessions/wave; w++ {
		var wg sync.WaitGroup
		errs := make(chan error, wave)
		list := make([]*Session, wave)
		for i := range wave {
			s, err := r.NewSession(SessionConfig{ID: "leak", LocalA: boxA, LocalB: boxB})
			if err != nil {
				t.Fatal(err)
			}
			list[i] = s
			toB, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
			if err != nil {
				t.Fatal(err)
			}
			toA, err := s.Answer(B, pb.sdp(1, []string{"0 PCMU"}))
			if err != nil {
				t.Fatal(err)
			}
			_ = toB
			pa.send(addrOf(mediaOf(t, toA)), 0, []byte{byte(i)})
		}
		if got := r.PortsInUse(); got != 4*wave {
			t.Fatalf("wave %d: %d ports in use, want %d", w, got, 4*wave)
		}
		for range wave {
			pb.recv()
		}
		for _, s := range list {
			wg.Go(func() {
				st := s.Close()
				if st[A].Relayed != 1 {
					errs <- errors.New("a session relayed nothing")
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := r.PortsInUse(); got != 0 {
			t.Fatalf("wave %d: %d ports still in use after Close", w, got)
		}
	}
	if st := r.Stats(); st.Sessions != 0 || st.Relayed[A] != sessions || st.PortsInUse != 0 {
		t.Errorf("relay stats %+v", st)
	}
}

// Every way a session ends releases its ports.
func TestReleasePaths(t *testing.T) {
	t.Run("close twice and concurrently", func(t *testing.T) {
		r := newRelay(t, Config{})
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { s.Close() })
		}
		wg.Wait()
		if n := r.PortsInUse(); n != 0 {
			t.Errorf("%d ports in use", n)
		}
		if _, err := s.Offer(A, pa.sdp(2, []string{"0 PCMU"})); !errors.Is(err, ErrClosed) {
			t.Errorf("Offer after Close = %v", err)
		}
	})
	t.Run("offer only (CANCEL before any answer)", func(t *testing.T) {
		r := newRelay(t, Config{})
		pa := newPhone(t, phoneA)
		s, err := r.NewSession(SessionConfig{ID: "cancel", LocalA: boxA, LocalB: boxB})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"})); err != nil {
			t.Fatal(err)
		}
		if n := r.PortsInUse(); n != 2 {
			t.Errorf("after offer: %d ports, want 2 (B side only)", n)
		}
		s.Close()
		if n := r.PortsInUse(); n != 0 {
			t.Errorf("%d ports in use", n)
		}
	})
	t.Run("refused answer then close", func(t *testing.T) {
		r := newRelay(t, Config{})
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		s, _ := r.NewSession(SessionConfig{ID: "bad answer", LocalA: boxA, LocalB: boxB})
		s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
		if _, err := s.Answer(B, pb.sdp(1, []string{"18 G729"})); !errors.Is(err, ErrNotAcceptable) {
			t.Fatalf("answer: %v", err)
		}
		s.Close()
		if n := r.PortsInUse(); n != 0 {
			t.Errorf("%d ports in use", n)
		}
	})
	t.Run("range exhausted", func(t *testing.T) {
		r := newRelay(t, Config{PortMin: 47000, PortMax: 47003}) // two pairs
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		s1, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
		s2, _ := r.NewSession(SessionConfig{ID: "no room", LocalA: boxA, LocalB: boxB})
		// boxA and boxB are different addresses: the same two pairs
		// serve both, so a second call fits exactly on another address
		// pair... which it does not have: make it collide instead.
		s2.local = [2]netip.Addr{boxA, boxA}
		if _, err := s2.Offer(A, pa.sdp(1, []string{"0 PCMU"})); err != nil {
			t.Fatalf("first pair on boxA: %v", err)
		}
		if _, err := s2.Answer(B, pb.sdp(1, []string{"0 PCMU"})); !errors.Is(err, ErrNoPorts) {
			t.Fatalf("Answer with no free pair = %v, want ErrNoPorts", err)
		}
		s2.Close()
		s1.Close()
		if n := r.PortsInUse(); n != 0 {
			t.Errorf("%d ports in use", n)
		}
	})
	t.Run("Run's end closes sessions", func(t *testing.T) {
		r, err := New(Config{PortMin: testPortMin, PortMax: testPortMax}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		for range 5 {
			call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
		}
		if n := r.PortsInUse(); n != 20 {
			t.Errorf("%d ports in use, want 20", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := r.PortsInUse(); n != 0 {
			t.Errorf("%d ports in use after Run", n)
		}
		if _, err := r.NewSession(SessionConfig{ID: "late", LocalA: boxA, LocalB: boxB}); !errors.Is(err, ErrClosed) {
			t.Errorf("NewSession after Run = %v", err)
		}
		if err := r.Run(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("second Run = %v", err)
		}
	})
}

func TestNewSessionNeedsAddresses(t *testing.T) {
	r := newRelay(t, Config{})
	for _, sc := range []SessionConfig{{LocalA: boxA}, {LocalB: boxB}, {LocalA: netip.IPv4Unspecified(), LocalB: boxB}} {
		if _, err := r.NewSession(sc); err == nil {
			t.Errorf("NewSession(%+v) accepted", sc)
		}
	}
}

var _ = net.ErrClosed
