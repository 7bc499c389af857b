package relay

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/pion/rtp"

	"github.com/outpost/outpost/media/g711"
)

// Music on hold: when a leg holds the call (a re-offer with sendonly,
// inactive or c=0.0.0.0: it will not listen), the box plays
// Config.MusicOnHold to the other leg, if that leg can receive and its
// codec is G.711, instead of relaying what the holder sends; an
// "inactive" hold is offered to the held leg as sendonly so that it
// listens. Resuming (a sendrecv re-offer) stops the music and the relay
// goes on. The first offer of a call is never a hold: a call that starts
// sendonly (an announcement, a paging call) is relayed as it is.
//
// The player is a goroutine of the session with a 20 ms ticker: it
// sends 160-sample frames from the box's socket facing the held leg, in
// that leg's law and payload type, with an SSRC of its own (the held
// phone sees a new source, as after any re-INVITE), through an SRTP
// context of its own keyed with the box's key toward the leg (a pion
// Context is not safe for concurrent use, and the forwarder keeps its
// own). Holds are rare and short, so the ticker's wake-ups are not the
// relay's hot path.

// mohFrame is one 20 ms frame of G.711 at 8 kHz.
const mohFrame = 160

// mohPlayer plays to one leg until stop is closed; done closes when it
// has returned.
type mohPlayer struct {
	stop, done chan struct{}
}

// holding reports whether leg l holds the call: its SDP, from its own
// re-offer, says it will not receive, or the box holds for it (HoldFor).
// Called with s.mu held.
func (s *Session) holding(l Leg) bool {
	n := s.neg[l]
	return n != nil && n.hold || s.heldFor[l]
}

// HoldFor makes the box hold the call on behalf of leg l (on) or stop
// (off): the other leg hears music on hold, as if l had held, and
// nothing is relayed to l. It is for a leg whose party left while the
// other stays, a parked call; the next offer from l, after HoldFor(l,
// false), brings the leg back.
func (s *Session) HoldFor(l Leg, on bool) {
	if !validLeg(l) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.heldFor[l] == on {
		return
	}
	s.heldFor[l] = on
	if s.neg[A] != nil && s.neg[B] != nil {
		s.publish(A)
		s.publish(B)
		s.updateMOH()
		s.resetInactivity()
	}
}

// wantsMOH reports whether the box should play music on hold to leg to.
// Called with s.mu held.
func (s *Session) wantsMOH(to Leg) bool {
	n := s.neg[to]
	return len(s.moh) > 0 && !s.closed && s.holding(Other(to)) && n != nil && n.dir.Receives() && isG711(n.codec)
}

// updateMOH starts or stops the players after a negotiation. Called with
// s.mu held; a player never takes s.mu, so stopping one here cannot
// deadlock.
func (s *Session) updateMOH() {
	for l := range 2 {
		want, p := s.wantsMOH(l), s.players[l]
		switch {
		case want && p == nil:
			s.players[l] = s.startMOH(l)
			s.r.log.Debug("media/relay: music on hold", "session", s.id, "to", legName(l))
		case !want && p != nil:
			p.halt()
			s.players[l] = nil
		}
	}
}

func (p *mohPlayer) halt() {
	close(p.stop)
	<-p.done
}

// startMOH starts a player to leg to, with the codec and SRTP key the leg
// negotiated. Called with s.mu held.
func (s *Session) startMOH(to Leg) *mohPlayer {
	p := &mohPlayer{stop: make(chan struct{}), done: make(chan struct{})}
	codec := s.neg[to].codec
	var tx *cryptoCtx
	if n := s.srtpNeg[to]; n != nil {
		var err error
		if tx, err = newCryptoCtx(n.suite, n.txKey, false); err != nil {
			s.r.log.Warn("media/relay: music on hold without SRTP context", "session", s.id, "err", err)
			close(p.done)
			return p
		}
	}
	f := newMOHFrames(s.moh, codec.PT, codec.Is("PCMA"))
	io := &s.io[to]
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(p.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		buf := make([]byte, 0, rtpHeaderLen+mohFrame+srtpSlack)
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			peer, pr := io.peerRTP.Load(), io.pair.Load()
			if peer == nil || !peer.IsValid() || pr == nil {
				continue
			}
			out := f.next(buf)
			if tx != nil {
				enc, err := tx.rtp.EncryptRTP(out, out, nil) // in place, into buf's slack
				if err != nil {
					continue
				}
				out = enc
			}
			pr.sendRTP(out, *peer)
			io.moh.Add(1)
		}
	}()
	return p
}

// rtpHeaderLen is a header without CSRCs or extension.
const rtpHeaderLen = 12

// mohFrames cuts the recording into RTP packets.
type mohFrames struct {
	samples []byte
	pos     int
	alaw    bool
	hdr     rtp.Header
}

func newMOHFrames(samples []byte, pt uint8, alaw bool) *mohFrames {
	var r [10]byte
	_, _ = rand.Read(r[:])
	return &mohFrames{samples: samples, alaw: alaw, hdr: rtp.Header{Version: 2, PayloadType: pt, Marker: true,
		SSRC: binary.BigEndian.Uint32(r[0:4]), SequenceNumber: binary.BigEndian.Uint16(r[4:6]), Timestamp: binary.BigEndian.Uint32(r[6:10])}}
}

// next writes the next frame into buf's capacity and returns it; it does
// not allocate.
func (m *mohFrames) next(buf []byte) []byte {
	out := buf[:rtpHeaderLen+mohFrame]
	_, _ = m.hdr.MarshalTo(out[:rtpHeaderLen])
	pl := out[rtpHeaderLen:]
	for i := range pl {
		pl[i] = m.samples[m.pos]
		if m.pos++; m.pos == len(m.samples) {
			m.pos = 0
		}
	}
	if m.alaw {
		g711.UlawToAlawInPlace(pl)
	}
	m.hdr.Marker = false
	m.hdr.SequenceNumber++
	m.hdr.Timestamp += mohFrame
	return out
}
