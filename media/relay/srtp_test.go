package relay

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/media/g711"
	"github.com/outpost/outpost/media/sdprewrite"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
)

// srtpPeer is an SDES-SRTP endpoint built on pion/srtp: a phone whose
// packets are protected with its own key and who checks the box's with
// the key the box wrote in its SDP.
type srtpPeer struct {
	*phone
	crypto sdprewrite.Crypto // the peer's own line (its key)
	tx, rx *srtp.Context
}

func newSRTPPeer(t testing.TB, p *phone, tag int, suite string) *srtpPeer {
	t.Helper()
	key := bytes.Repeat([]byte{byte(tag)*16 + 1}, sdprewrite.SuiteKeyLen(suite))
	for i := range key {
		key[i] ^= byte(i * 7)
	}
	sp := &srtpPeer{phone: p, crypto: sdprewrite.Crypto{Tag: tag, Suite: suite, Key: key}}
	sp.tx = pionContext(t, suite, key)
	return sp
}

func pionContext(t testing.TB, suite string, key []byte) *srtp.Context {
	t.Helper()
	prof, ok := profileOf(suite)
	if !ok {
		t.Fatalf("suite %s", suite)
	}
	kl, _ := prof.KeyLen()
	c, err := srtp.CreateContext(key[:kl], key[kl:], prof)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// savp turns a phone's SDP into RTP/SAVP with the given a=crypto lines.
func savp(sdp []byte, lines ...sdprewrite.Crypto) []byte {
	s := strings.Replace(string(sdp), "RTP/AVP", "RTP/SAVP", 1)
	for _, c := range lines {
		s += "a=crypto:" + c.Line() + "\r\n"
	}
	return []byte(s)
}

// keyFrom takes the box's key out of an SDP it wrote (the line with tag).
func keyFrom(t testing.TB, sdp []byte, tag int) sdprewrite.Crypto {
	t.Helper()
	m := mediaOf(t, sdp)
	if !sdprewrite.IsSecure(m.Proto) {
		t.Fatalf("box wrote %s, want RTP/SAVP:\n%s", m.Proto, sdp)
	}
	for _, c := range m.Crypto {
		if c.Tag == tag {
			return c
		}
	}
	t.Fatalf("no a=crypto tag %d in:\n%s", tag, sdp)
	return sdprewrite.Crypto{}
}

// sendSRTP protects one RTP packet with the peer's key and sends it.
func (sp *srtpPeer) sendSRTP(pt uint8, payload []byte, tamper bool) []byte {
	sp.t.Helper()
	enc, err := sp.tx.EncryptRTP(nil, sp.packet(pt, payload), nil)
	if err != nil {
		sp.t.Fatal(err)
	}
	if tamper {
		enc[20] ^= 0x01 // one payload bit
	}
	return enc
}

// recvRaw waits (bounded) for the next datagram on the peer's RTP socket.
func recvRaw(t testing.TB, p *phone, d time.Duration) ([]byte, error) {
	t.Helper()
	b := make([]byte, 2048)
	_ = p.rtp.SetReadDeadline(time.Now().Add(d))
	n, _, err := p.rtp.ReadFromUDPAddrPort(b)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

// srtpCall sets up plain phone pa (leg A, offerer, µ-law) and SRTP peer
// pb (leg B, answering A-law with its line accepting the box's tag) on a
// session whose leg B requires SRTP.
func srtpCall(t *testing.T, r *Relay, pa *phone, pb *srtpPeer) (s *Session, toBoxA, toBoxB []byte, boxKey sdprewrite.Crypto) {
	t.Helper()
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB, SRTP: [2]SRTPPolicy{SRTPOff, SRTPRequire}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	toB, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
	if err != nil {
		t.Fatal(err)
	}
	if m := mediaOf(t, toB); m.Proto != "RTP/SAVP" || len(m.Crypto) != len(sdprewrite.Suites) {
		t.Fatalf("offer to the SRTP leg: %s with %d crypto lines:\n%s", m.Proto, len(m.Crypto), toB)
	}
	boxKey = keyFrom(t, toB, pb.crypto.Tag)
	if boxKey.Suite != pb.crypto.Suite {
		t.Fatalf("box's tag %d is %s, want %s", pb.crypto.Tag, boxKey.Suite, pb.crypto.Suite)
	}
	toA, err := s.Answer(B, savp(pb.sdp(1, []string{"8 PCMA"}), pb.crypto))
	if err != nil {
		t.Fatal(err)
	}
	if m := mediaOf(t, toA); m.Proto != "RTP/AVP" || m.CryptoLines != 0 {
		t.Fatalf("answer to the plain leg: %s with %d crypto lines:\n%s", m.Proto, m.CryptoLines, toA)
	}
	pb.rx = pionContext(t, boxKey.Suite, boxKey.Key)
	return s, toA, toB, boxKey
}

// TestSRTPPlainToSRTP: a plain µ-law phone on leg A, a pion/srtp peer
// (A-law) on leg B, through real loopback sockets, for every suite.
func TestSRTPPlainToSRTP(t *testing.T) {
	for i, suite := range sdprewrite.Suites {
		t.Run(suite, func(t *testing.T) {
			r := newRelay(t, Config{})
			pa := newPhone(t, phoneA)
			pb := newSRTPPeer(t, newPhone(t, phoneB), i+1, suite) // the box offers tags 1, 2, 3 in Suites order
			s, toA, toB, _ := srtpCall(t, r, pa, pb)
			boxForA, boxForB := addrOf(mediaOf(t, toA)), addrOf(mediaOf(t, toB))

			// A → B: plain µ-law in, SRTP A-law out.
			ulaw := make([]byte, 160)
			for j := range ulaw {
				ulaw[j] = byte(j*3 + 1)
			}
			alaw := append([]byte(nil), ulaw...)
			g711.UlawToAlawInPlace(alaw)
			pa.send(boxForA, 0, ulaw)
			raw, err := recvRaw(t, pb.phone, 5*time.Second)
			if err != nil {
				t.Fatalf("B got nothing: %v", err)
			}
			tagLen := map[string]int{sdprewrite.SuiteAES80: 10, sdprewrite.SuiteAES32: 4, sdprewrite.SuiteGCM128: 16}[suite]
			if len(raw) != 12+160+tagLen {
				t.Errorf("SRTP packet of %d bytes, want %d", len(raw), 12+160+tagLen)
			}
			if bytes.Contains(raw, alaw[:32]) || bytes.Contains(raw, ulaw[:32]) {
				t.Fatal("the SRTP leg's packet carries the payload in clear")
			}
			var h rtp.Header
			dec, err := pb.rx.DecryptRTP(nil, raw, &h)
			if err != nil {
				t.Fatalf("box's packet does not authenticate with the key of its SDP: %v", err)
			}
			if h.PayloadType != 8 || !bytes.Equal(dec[12:], alaw) {
				t.Fatalf("B decrypted PT %d, payload transcoded correctly %v", h.PayloadType, bytes.Equal(dec[12:], alaw))
			}

			// B → A: SRTP A-law in, plain µ-law out.
			back := bytes.Repeat([]byte{0xd5}, 160)
			want := append([]byte(nil), back...)
			g711.AlawToUlawInPlace(want)
			if _, err := pb.rtp.WriteToUDPAddrPort(pb.sendSRTP(8, back, false), boxForB); err != nil {
				t.Fatal(err)
			}
			got := pa.recv()
			if got.pt != 0 || !bytes.Equal(got.payload, want) {
				t.Fatalf("A got PT %d, %d bytes; want PT 0 with the decrypted, transcoded payload", got.pt, len(got.payload))
			}

			// A tampered packet is dropped and counted.
			if _, err := pb.rtp.WriteToUDPAddrPort(pb.sendSRTP(8, back, true), boxForB); err != nil {
				t.Fatal(err)
			}
			if p, err := pa.tryRecv(300 * time.Millisecond); err == nil {
				t.Fatalf("a tampered packet was relayed: %+v", p)
			}
			// A replay of a good packet is dropped too, as a duplicate.
			good := pb.sendSRTP(8, back, false)
			for range 2 {
				if _, err := pb.rtp.WriteToUDPAddrPort(good, boxForB); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := pa.tryRecv(2 * time.Second); err != nil {
				t.Fatalf("good packet after the tampered one: %v", err)
			}
			if p, err := pa.tryRecv(300 * time.Millisecond); err == nil {
				t.Fatalf("a replayed packet was relayed: %+v", p)
			}
			st := s.Stats()
			if st[B].SRTPAuthFailures != 1 || st[B].SRTP != suite || st[A].SRTP != "" || st[A].SRTPAuthFailures != 0 {
				t.Errorf("stats: A %+v, B %+v", st[A], st[B])
			}
			if st[B].Relayed != 2 || st[B].Dropped != 1 {
				t.Errorf("B relayed %d, dropped %d; want 2 and 1 (the replay)", st[B].Relayed, st[B].Dropped)
			}
		})
	}
}

// TestSRTPToSRTP: both legs SRTP, each with its own keys (per hop): the
// box decrypts with A's key and encrypts with its own towards B.
func TestSRTPToSRTP(t *testing.T) {
	r := newRelay(t, Config{SRTP: SRTPOffer})
	pa := newSRTPPeer(t, newPhone(t, phoneA), 5, sdprewrite.SuiteAES80)
	pb := newSRTPPeer(t, newPhone(t, phoneB), 3, sdprewrite.SuiteGCM128)
	s, err := r.NewSession(SessionConfig{ID: t.Name(), LocalA: boxA, LocalB: boxB})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toB, err := s.Offer(A, savp(pa.sdp(1, []string{"0 PCMU"}), pa.crypto))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(toB, []byte(base64.StdEncoding.EncodeToString(pa.crypto.Key))) {
		t.Fatal("A's key was passed on to B")
	}
	boxToB := keyFrom(t, toB, 3)
	toA, err := s.Answer(B, savp(pb.sdp(1, []string{"0 PCMU"}), pb.crypto))
	if err != nil {
		t.Fatal(err)
	}
	boxToA := keyFrom(t, toA, 5) // the answer keeps the offer's tag
	if boxToA.Suite != sdprewrite.SuiteAES80 || bytes.Equal(boxToA.Key, pb.crypto.Key) {
		t.Fatalf("answer to A: %v", boxToA)
	}
	pa.rx, pb.rx = pionContext(t, boxToA.Suite, boxToA.Key), pionContext(t, boxToB.Suite, boxToB.Key)
	payload := bytes.Repeat([]byte{0x42}, 160)
	if _, err := pa.rtp.WriteToUDPAddrPort(pa.sendSRTP(0, payload, false), addrOf(mediaOf(t, toA))); err != nil {
		t.Fatal(err)
	}
	raw, err := recvRaw(t, pb.phone, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := pb.rx.DecryptRTP(nil, raw, nil)
	if err != nil || !bytes.Equal(dec[12:], payload) {
		t.Fatalf("B: %v", err)
	}
	if _, err := pb.rtp.WriteToUDPAddrPort(pb.sendSRTP(0, payload, false), addrOf(mediaOf(t, toB))); err != nil {
		t.Fatal(err)
	}
	raw, err = recvRaw(t, pa.phone, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := pa.rx.DecryptRTP(nil, raw, nil); err != nil || !bytes.Equal(dec[12:], payload) {
		t.Fatalf("A: %v", err)
	}
}

// TestSRTPPolicy: what off, offer and require accept and refuse.
func TestSRTPPolicy(t *testing.T) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	key := newSRTPPeer(t, pa, 1, sdprewrite.SuiteAES80).crypto
	session := func(a, b SRTPPolicy) *Session {
		s, err := r.NewSession(SessionConfig{ID: "policy", LocalA: boxA, LocalB: boxB, SRTP: [2]SRTPPolicy{a, b}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	var st interface{ SIPStatus() int }

	// require + a plain offer: refused with 488, no port bound.
	s := session(SRTPRequire, SRTPOff)
	_, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
	if !errors.Is(err, ErrNotAcceptable) || !errors.As(err, &st) || st.SIPStatus() != 488 {
		t.Errorf("require, plain offer: %v", err)
	}
	// require + an offer whose only a=crypto cannot be keyed (MKI).
	mki := "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:" + base64.StdEncoding.EncodeToString(key.Key) + "|2^31|1:4"
	if _, err := s.Offer(A, savp(pa.sdp(1, []string{"0 PCMU"}, mki))); !errors.Is(err, ErrNotAcceptable) {
		t.Errorf("require, MKI-only offer: %v", err)
	}
	if _, err := s.Offer(A, savp(pa.sdp(1, []string{"0 PCMU"}), key)); err != nil {
		t.Errorf("require, SRTP offer: %v", err)
	}

	// off + an RTP/SAVP offer: refused (an answer cannot change the profile).
	s = session(SRTPOff, SRTPOff)
	if _, err := s.Offer(A, savp(pa.sdp(1, []string{"0 PCMU"}), key)); !errors.Is(err, ErrNotAcceptable) {
		t.Errorf("off, SRTP offer: %v", err)
	}
	toB, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
	if err != nil || mediaOf(t, toB).Proto != "RTP/AVP" || bytes.Contains(toB, []byte("a=crypto")) {
		t.Errorf("off: offer to B %v\n%s", err, toB)
	}

	// offer on B: RTP/SAVP offered, a plain answer accepted (B stays plain).
	s = session(SRTPOff, SRTPOffer)
	toB, err = s.Offer(A, pa.sdp(1, []string{"0 PCMU"}))
	if err != nil || mediaOf(t, toB).Proto != "RTP/SAVP" {
		t.Fatalf("offer: %v\n%s", err, toB)
	}
	if _, err := s.Answer(B, pb.sdp(1, []string{"0 PCMU"})); err != nil {
		t.Errorf("offer, plain answer: %v", err)
	}
	if got := s.Stats()[B].SRTP; got != "" {
		t.Errorf("B is %q after a plain answer", got)
	}

	// require on B: a plain answer is refused.
	s = session(SRTPOff, SRTPRequire)
	if _, err := s.Offer(A, pa.sdp(1, []string{"0 PCMU"})); err != nil {
		t.Fatal(err)
	}
	_, err = s.Answer(B, pb.sdp(1, []string{"0 PCMU"}))
	if !errors.Is(err, ErrNotAcceptable) || !errors.As(err, &st) || st.SIPStatus() != 488 {
		t.Errorf("require, plain answer: %v", err)
	}

	if _, err := r.NewSession(SessionConfig{ID: "bad", LocalA: boxA, LocalB: boxB, SRTP: [2]SRTPPolicy{"maybe"}}); err == nil {
		t.Error("policy \"maybe\" accepted")
	}
	if _, err := (Config{SRTP: "always"}).Check(); err == nil {
		t.Error("Config.SRTP \"always\" accepted")
	}
}

// lockedBuffer is a log sink safe for the relay's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSRTPKeysNotLogged: a session's debug logs (and its errors) with
// SRTP on both sides contain no key material.
func TestSRTPKeysNotLogged(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r, err := New(Config{PortMin: testPortMin, PortMax: testPortMax}, log)
	if err != nil {
		t.Fatal(err)
	}
	pa := newPhone(t, phoneA)
	pb := newSRTPPeer(t, newPhone(t, phoneB), 1, sdprewrite.SuiteAES80)
	s, _, toB, boxKey := srtpCall(t, r, pa, pb)
	// A refused answer and a tampered packet log too, if anything does.
	_, errAns := s.Answer(B, savp(pb.sdp(2, []string{"8 PCMA"}), pb.crypto))
	_, _ = pb.rtp.WriteToUDPAddrPort(pb.sendSRTP(8, make([]byte, 160), true), addrOf(mediaOf(t, toB)))
	for deadline := time.Now().Add(5 * time.Second); s.Stats()[B].SRTPAuthFailures == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tampered packet was not counted")
		}
	}
	s.Close()
	out := logs.String()
	if !strings.Contains(out, "SRTP on leg") {
		t.Fatalf("no SRTP debug log at all:\n%s", out)
	}
	for _, c := range append([]sdprewrite.Crypto{boxKey, pb.crypto}, mediaOf(t, toB).Crypto...) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			k := enc.EncodeToString(c.Key)
			if strings.Contains(out, k[:16]) {
				t.Errorf("log holds key material of tag %d (%s):\n%s", c.Tag, c.Suite, out)
			}
			if errAns != nil && strings.Contains(errAns.Error(), k[:16]) {
				t.Errorf("error holds key material: %v", errAns)
			}
		}
		if strings.Contains(out, string(c.Key[:8])) {
			t.Errorf("log holds raw key bytes")
		}
	}
	for _, c := range mediaOf(t, toB).Crypto {
		if got := slogString(c); strings.Contains(got, base64.StdEncoding.EncodeToString(c.Key)[:16]) {
			t.Errorf("Crypto's LogValue shows the key: %s", got)
		}
	}
}

func slogString(v any) string {
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "crypto", v)
	return b.String()
}
