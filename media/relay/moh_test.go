package relay

import (
	"bytes"
	"testing"
	"time"

	"github.com/pion/rtp"

	"github.com/outpost/outpost/media/g711"
	"github.com/outpost/outpost/media/sdprewrite"
)

// mohSamples is a recognisable recording: 0x10, 0x11, ... repeating.
func mohSamples() []byte {
	b := make([]byte, 4*mohFrame)
	for i := range b {
		b[i] = byte(0x10 + i%0x60)
	}
	return b
}

// recvMOH waits for n music-on-hold packets at p and checks their
// payloads follow the recording (in alaw when asked).
func recvMOH(t *testing.T, p *phone, n int, pt uint8, alaw bool) uint32 {
	t.Helper()
	want := mohSamples()
	var ssrc uint32
	for i := range n {
		got := p.recv()
		if got.pt != pt || len(got.payload) != mohFrame {
			t.Fatalf("packet %d: PT %d, %d bytes; want PT %d, %d", i, got.pt, len(got.payload), pt, mohFrame)
		}
		exp := append([]byte(nil), want[(i*mohFrame)%len(want):][:mohFrame]...)
		if alaw {
			g711.UlawToAlawInPlace(exp)
		}
		if !bytes.Equal(got.payload, exp) {
			t.Fatalf("packet %d payload % x..., want % x...", i, got.payload[:4], exp[:4])
		}
		if i > 0 && got.ssrc != ssrc {
			t.Fatalf("music on hold changed SSRC mid-stream")
		}
		ssrc = got.ssrc
	}
	return ssrc
}

// A sendonly hold: B hears the box's recording, not A's packets; resume
// stops it and A's media flows again.
func TestMusicOnHoldSendonly(t *testing.T) {
	r := newRelay(t, Config{MusicOnHold: mohSamples()})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, toBoxA, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	pa.send(toBoxA, 0, []byte{1})
	if got := pb.recv(); got.payload[0] != 1 {
		t.Fatalf("before hold B got %v", got.payload)
	}
	toB, err := s.Offer(A, pa.sdp(2, []string{"0 PCMU"}, "a=sendonly"))
	if err != nil {
		t.Fatal(err)
	}
	if d := mediaOf(t, toB).Direction.String(); d != "sendonly" {
		t.Errorf("B offered %s", d)
	}
	if _, err := s.Answer(B, pb.sdp(2, []string{"0 PCMU"}, "a=recvonly")); err != nil {
		t.Fatal(err)
	}
	pa.send(toBoxA, 0, []byte{2, 2, 2}) // the holder's own audio is not relayed
	recvMOH(t, pb, 5, 0, false)
	if st := s.Stats(); st[B].MusicOnHold < 5 || st[A].Relayed != 1 {
		t.Errorf("stats %+v: want 5+ music packets to B, A's one packet before the hold relayed", st)
	}

	if _, err := s.Offer(A, pa.sdp(3, []string{"0 PCMU"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(B, pb.sdp(3, []string{"0 PCMU"})); err != nil {
		t.Fatal(err)
	}
	sent := s.Stats()[B].MusicOnHold
	pa.send(toBoxA, 0, []byte{7})
	for { // music packets already on their way may come first
		got := pb.recv()
		if len(got.payload) == 1 && got.payload[0] == 7 {
			break
		}
	}
	if n := s.Stats()[B].MusicOnHold; n > sent+1 {
		t.Errorf("music on hold went on after the resume (%d more packets)", n-sent)
	}
}

// An inactive hold is offered to the held leg as sendonly (so that it
// listens), answered to the holder as inactive, and the music is in the
// held leg's law.
func TestMusicOnHoldInactiveToALaw(t *testing.T) {
	r := newRelay(t, Config{MusicOnHold: mohSamples()})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"8 PCMA"})
	toB, err := s.Offer(A, pa.sdp(2, []string{"0 PCMU"}, "a=inactive"))
	if err != nil {
		t.Fatal(err)
	}
	if d := mediaOf(t, toB).Direction.String(); d != "sendonly" {
		t.Errorf("B offered %s, want sendonly: the box plays music", d)
	}
	toA, err := s.Answer(B, pb.sdp(2, []string{"8 PCMA"}, "a=recvonly"))
	if err != nil {
		t.Fatal(err)
	}
	if d := mediaOf(t, toA).Direction.String(); d != "inactive" {
		t.Errorf("A's answer %s, want inactive (RFC 3264 §6.1)", d)
	}
	recvMOH(t, pb, 3, 8, true)
}

// A call whose first offer is sendonly (an announcement) is relayed: it
// is not a hold; and without a recording nothing is played.
func TestMusicOnHoldNotForAnnouncementsOrWithoutRecording(t *testing.T) {
	r := newRelay(t, Config{MusicOnHold: mohSamples()})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"}, "a=sendonly")); err != nil {
		t.Fatal(err)
	}
	toA, err := s.Answer(B, pb.sdp(1, []string{"0 PCMU"}, "a=recvonly"))
	if err != nil {
		t.Fatal(err)
	}
	pa.send(addrOf(mediaOf(t, toA)), 0, []byte{9})
	if got := pb.recv(); len(got.payload) != 1 || got.payload[0] != 9 {
		t.Fatalf("B got %v, want the announcement's packet", got.payload)
	}
	if n := s.Stats()[B].MusicOnHold; n != 0 {
		t.Errorf("%d music packets on a call that started sendonly", n)
	}

	pa2, pb2 := newPhone(t, phoneA), newPhone(t, phoneB)
	s2, _, _ := call(t, newRelay(t, Config{}), pa2, pb2, []string{"0 PCMU"}, []string{"0 PCMU"})
	if _, err := s2.Offer(A, pa2.sdp(2, []string{"0 PCMU"}, "a=sendonly")); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Answer(B, pb2.sdp(2, []string{"0 PCMU"}, "a=recvonly")); err != nil {
		t.Fatal(err)
	}
	if _, err := pb2.tryRecv(100 * time.Millisecond); err == nil {
		t.Error("a relay without a recording played something")
	}
}

// Closing a held session stops its player (Close waits for it).
func TestMusicOnHoldStopsAtClose(t *testing.T) {
	r := newRelay(t, Config{MusicOnHold: mohSamples()})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, _, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	if _, err := s.Offer(A, pa.sdp(2, []string{"0 PCMU"}, "a=sendonly")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(B, pb.sdp(2, []string{"0 PCMU"}, "a=recvonly")); err != nil {
		t.Fatal(err)
	}
	recvMOH(t, pb, 1, 0, false)
	final := s.Close()
	if _, err := pb.tryRecv(100 * time.Millisecond); err == nil {
		for { // drain what was in flight
			if _, err := pb.tryRecv(50 * time.Millisecond); err != nil {
				break
			}
		}
	}
	if final[B].MusicOnHold == 0 {
		t.Error("no music counted")
	}
	if _, err := pb.tryRecv(100 * time.Millisecond); err == nil {
		t.Error("music after Close")
	}
}

func BenchmarkMOHFrame(b *testing.B) {
	f := newMOHFrames(mohSamples(), 8, true)
	buf := make([]byte, 0, rtpHeaderLen+mohFrame+srtpSlack)
	b.ReportAllocs()
	for b.Loop() {
		f.next(buf)
	}
}

// On an SRTP leg the music is encrypted with the box's key toward it,
// and in its law.
func TestMusicOnHoldOverSRTP(t *testing.T) {
	r := newRelay(t, Config{MusicOnHold: mohSamples()})
	pa := newPhone(t, phoneA)
	pb := newSRTPPeer(t, newPhone(t, phoneB), 1, sdprewrite.Suites[0])
	s, _, _, boxKey := srtpCall(t, r, pa, pb)
	if _, err := s.Offer(A, pa.sdp(2, []string{"0 PCMU"}, "a=sendonly")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(B, savp(pb.sdp(2, []string{"8 PCMA"}, "a=recvonly"), pb.crypto)); err != nil {
		t.Fatal(err)
	}
	rx := pionContext(t, boxKey.Suite, boxKey.Key)
	want := mohSamples()[:mohFrame]
	g711.UlawToAlawInPlace(want)
	raw, err := recvRaw(t, pb.phone, 5*time.Second)
	if err != nil {
		t.Fatalf("no music: %v", err)
	}
	var h rtp.Header
	dec, err := rx.DecryptRTP(nil, raw, &h)
	if err != nil {
		t.Fatalf("the music does not authenticate with the box's key: %v", err)
	}
	if h.PayloadType != 8 || !bytes.Equal(dec[12:], want) {
		t.Errorf("decrypted PT %d, payload % x..., want PT 8 with the recording in A-law", h.PayloadType, dec[12:16])
	}
}

// HoldFor: the box holds for leg A, whose party left (a parked call): B
// hears the recording and B's media goes nowhere; a new party's offer on
// leg A after HoldFor(A, false) brings the call back.
func TestHoldFor(t *testing.T) {
	r := newRelay(t, Config{MusicOnHold: mohSamples()})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, _, toBoxB := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	s.HoldFor(A, true)
	recvMOH(t, pb, 3, 0, false)
	pb.send(toBoxB, 0, []byte{7})
	waitFor(t, "B's packet dropped", func() bool { return s.Stats()[B].Dropped == 1 })
	if _, err := pa.tryRecv(50 * time.Millisecond); err == nil {
		t.Error("B's media reached the leg the box holds for")
	}
	// Another phone takes leg A over.
	pc := newPhone(t, phoneA)
	s.HoldFor(A, false)
	toB, err := s.Offer(A, pc.sdp(5, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	toC, err := s.Answer(B, pb.sdp(2, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	pc.send(addrOf(mediaOf(t, toC)), 0, []byte{8})
	for { // music still in flight before the first relayed packet
		if got := pb.recv(); len(got.payload) == 1 {
			if got.payload[0] != 8 {
				t.Fatalf("B got %v", got.payload)
			}
			break
		}
	}
	pb.send(addrOf(mediaOf(t, toB)), 0, []byte{9})
	if got := pc.recv(); got.payload[0] != 9 {
		t.Errorf("the new party got %v", got.payload)
	}
	if n := s.Stats()[B].MusicOnHold; n < 3 {
		t.Errorf("music packets %d", n)
	}
}
