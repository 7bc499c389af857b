package relay

import (
	"bytes"
	"crypto/rand"
	"fmt"

	"github.com/outpost/outpost/media/sdprewrite"
	"github.com/pion/srtp/v3"
)

// SRTPPolicy says whether a leg's media is SRTP, keyed by SDES (RFC 4568
// a=crypto lines in the SDP).
type SRTPPolicy string

const (
	// SRTPOff: plain RTP (RTP/AVP) only. The box sends no a=crypto to the
	// leg and refuses an RTP/SAVP offer from it (488): an answer cannot
	// change the offer's profile (RFC 3264 §6). The default.
	SRTPOff SRTPPolicy = "off"
	// SRTPOffer: the box offers RTP/SAVP with its keys to the leg and
	// accepts a plain RTP/AVP answer (the leg then stays plain); it
	// accepts plain and SRTP offers from the leg.
	SRTPOffer SRTPPolicy = "offer"
	// SRTPRequire: the leg's media must be SRTP: an offer or answer from it
	// without a usable a=crypto is refused (488).
	SRTPRequire SRTPPolicy = "require"
)

func (p SRTPPolicy) check() error {
	switch p {
	case SRTPOff, SRTPOffer, SRTPRequire:
		return nil
	}
	return fmt.Errorf("media/relay: SRTP policy %q (want %q, %q or %q)", p, SRTPOff, SRTPOffer, SRTPRequire)
}

// srtpSlack is the room kept after every read buffer so that SRTP's auth
// tag (10 or 4 bytes, 16 for GCM) and SRTCP's index and tag (4 + 10, or
// 4 + 16) fit when the box encrypts a packet in place.
const srtpSlack = 64

// profileOf maps an SDES suite name to pion's protection profile.
func profileOf(suite string) (srtp.ProtectionProfile, bool) {
	switch suite {
	case sdprewrite.SuiteAES80:
		return srtp.ProtectionProfileAes128CmHmacSha1_80, true
	case sdprewrite.SuiteAES32:
		return srtp.ProtectionProfileAes128CmHmacSha1_32, true
	case sdprewrite.SuiteGCM128:
		return srtp.ProtectionProfileAeadAes128Gcm, true
	}
	return 0, false
}

// legSRTP is what an offer/answer settled for one leg: the suite, the
// leg's key (what it sends is decrypted with it) and the box's key (what
// the box sends the leg is encrypted with it). nil = plain RTP.
type legSRTP struct {
	suite        string
	tag          int
	rxKey, txKey []byte
}

func (a *legSRTP) same(b *legSRTP) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.suite == b.suite && bytes.Equal(a.rxKey, b.rxKey) && bytes.Equal(a.txKey, b.txKey)
}

// cryptoCtx is one direction of one leg: a pion context for RTP and
// another for RTCP, because a Context is not safe for concurrent use and
// the RTP and RTCP readers are different goroutines. Each context is used
// by exactly one reader: the leg's own readers decrypt (rx), the other
// leg's readers encrypt (tx). It is replaced, never changed, when a new
// offer/answer changes the key; the reader loads it once per packet.
type cryptoCtx struct {
	suite     string
	rtp, rtcp *srtp.Context
}

// newCryptoCtx keys a context pair with key||salt for suite. Inbound
// contexts check replays (RFC 3711 §3.3.2, a 64-packet window).
func newCryptoCtx(suite string, key []byte, inbound bool) (*cryptoCtx, error) {
	prof, ok := profileOf(suite)
	if !ok {
		return nil, fmt.Errorf("SRTP suite %q not supported", suite)
	}
	kl, err := prof.KeyLen()
	if err != nil {
		return nil, err
	}
	if len(key) != sdprewrite.SuiteKeyLen(suite) {
		return nil, fmt.Errorf("SRTP %s: key of %d bytes", suite, len(key)) // length only, never the key
	}
	mk, salt := key[:kl], key[kl:]
	var rtpOpts, rtcpOpts []srtp.ContextOption
	if inbound {
		rtpOpts = []srtp.ContextOption{srtp.SRTPReplayProtection(64)}
		rtcpOpts = []srtp.ContextOption{srtp.SRTCPReplayProtection(64)}
	}
	c := &cryptoCtx{suite: suite}
	if c.rtp, err = srtp.CreateContext(mk, salt, prof, rtpOpts...); err != nil {
		return nil, fmt.Errorf("SRTP %s: %w", suite, err)
	}
	if c.rtcp, err = srtp.CreateContext(mk, salt, prof, rtcpOpts...); err != nil {
		return nil, fmt.Errorf("SRTP %s: %w", suite, err)
	}
	return c, nil
}

// ownKeys returns the box's SDES keys toward leg l for the audio stream
// (keysFor). Called with s.mu held.
func (s *Session) ownKeys(l Leg) []sdprewrite.Crypto { return keysFor(&s.own[l]) }

// ownKey returns the box's audio key toward l for suite.
func (s *Session) ownKey(l Leg, suite string) sdprewrite.Crypto { return keyFor(&s.own[l], suite) }

// keysFor returns the box's SDES keys kept in *own (one stream toward
// one leg), one per supported suite in preference order (tags 1, 2, 3),
// made with crypto/rand the first time the box offers SRTP there and kept
// for the session: re-offers then keep the same SDP and the same contexts
// (RFC 4568 §7.1.4 allows keeping keys). Each stream has keys of its own.
func keysFor(own *[]sdprewrite.Crypto) []sdprewrite.Crypto {
	if *own == nil {
		for i, suite := range sdprewrite.Suites {
			k := make([]byte, sdprewrite.SuiteKeyLen(suite))
			_, _ = rand.Read(k) // never fails (crypto/rand, Go ≥ 1.24)
			*own = append(*own, sdprewrite.Crypto{Tag: i + 1, Suite: suite, Key: k})
		}
	}
	return *own
}

// keyFor returns the key of *own (keysFor) for suite.
func keyFor(own *[]sdprewrite.Crypto, suite string) sdprewrite.Crypto {
	for _, c := range keysFor(own) {
		if c.Suite == suite {
			return c
		}
	}
	return sdprewrite.Crypto{} // not reached: every usable suite has a key
}

// answerCrypto finds the a=crypto of an answer that accepts one of the
// lines the box offered: same tag and suite (RFC 4568 §7.1.2).
func answerCrypto(answer, offered []sdprewrite.Crypto) (ans, own sdprewrite.Crypto, ok bool) {
	for _, a := range answer {
		for _, o := range offered {
			if a.Tag == o.Tag && a.Suite == o.Suite {
				return a, o, true
			}
		}
	}
	return ans, own, false
}

// commitSRTP installs the SRTP state of the audio stream on leg l
// (installSRTP). Called with s.mu held.
func (s *Session) commitSRTP(l Leg, n *legSRTP) error {
	return s.installSRTP(l, "audio", &s.io[l], &s.srtpNeg[l], n)
}

// installSRTP installs the SRTP state n (nil = plain) of one stream on
// leg l into io, *cur being the state in force, and keeps the contexts
// when nothing changed (183 then 200 with the same keys, a re-INVITE that
// keeps them), so their rollover counters and replay windows continue.
// Called with s.mu held. Keys are never logged.
func (s *Session) installSRTP(l Leg, stream string, io *legIO, cur **legSRTP, n *legSRTP) error {
	if n.same(*cur) {
		return nil
	}
	if n == nil {
		io.rx.Store(nil)
		io.tx.Store(nil)
		*cur = nil
		s.r.log.Debug("media/relay: plain RTP on leg", "session", s.id, "leg", legName(l), "stream", stream)
		return nil
	}
	rx, err := newCryptoCtx(n.suite, n.rxKey, true)
	if err != nil {
		return s.errorf("leg %s %s: %w", legName(l), stream, err)
	}
	tx, err := newCryptoCtx(n.suite, n.txKey, false)
	if err != nil {
		return s.errorf("leg %s %s: %w", legName(l), stream, err)
	}
	io.rx.Store(rx)
	io.tx.Store(tx)
	*cur = n
	s.r.log.Debug("media/relay: SRTP on leg", "session", s.id, "leg", legName(l), "stream", stream, "suite", n.suite, "tag", n.tag)
	return nil
}
