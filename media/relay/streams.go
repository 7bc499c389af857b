package relay

import (
	"slices"

	"github.com/outpost/outpost/media/sdprewrite"
)

// MaxStreams is how many m= sections besides the audio one a session
// relays (video, a presentation channel, a second audio stream, text);
// further ones are answered with port 0. Each takes a port pair per leg.
const MaxStreams = 4

// stream is a relayed m= section other than the audio one. Its packets
// pass between the legs with latching, statistics, directions and SRTP
// per leg like the audio's, but with no codec choice: the box offers the
// offerer's formats unchanged, so both legs use the same payload types
// and the payload passes untouched (no transcoding, no SSRC rewrite).
// Fields are under the session's mu, except what the forwarding path
// reads through io.
type stream struct {
	index int    // the m= section's place in the SDP (RFC 3264 §8: fixed for the session)
	kind  string // "video", "audio", "text"
	io    [2]legIO
	fwd   [2]forwarder
	pairs [2]*pair
	own   [2][]sdprewrite.Crypto // the box's keys toward each leg (keysFor)
	srtp  [2]*legSRTP            // SRTP in force per leg, nil = plain
	neg   [2]*streamNeg          // what the last answer settled, nil = not relayed
	offer *streamOffer           // the stream in the pending offer, nil = rejected there
}

// streamNeg is what an offer/answer settled for a stream on one leg.
type streamNeg struct {
	dir  sdprewrite.Direction // effective (c=0.0.0.0 folded in)
	sig  sigAddrs
	gen  uint64
	rate int // the clock rate of the stream's first format (jitter)
}

// streamOffer is a stream's part of the pending offer.
type streamOffer struct {
	from       Leg
	sec        sdprewrite.Section
	dir        sdprewrite.Direction
	crypto     *sdprewrite.Crypto  // the offerer's a=crypto the box accepts, nil = plain
	sentCrypto []sdprewrite.Crypto // the box's lines offered to the other leg, nil = plain
}

// StreamStats are the figures of a relayed stream other than the audio
// one, per leg as in Stats.
type StreamStats struct {
	Index int    // the m= section's place in the SDP
	Kind  string // its media type
	Legs  [2]LegStats
}

// Streams returns the figures of the streams relayed besides the audio
// one (open or closed), in SDP order.
func (s *Session) Streams() []StreamStats {
	s.mu.Lock()
	if s.closed && s.finalStreams != nil {
		defer s.mu.Unlock()
		return s.finalStreams
	}
	type entry struct {
		StreamStats
		st *stream
	}
	list := make([]entry, 0, len(s.streams))
	for _, st := range s.streams {
		list = append(list, entry{StreamStats{Index: st.index, Kind: st.kind}, st}) // kind may change under mu
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b entry) int { return a.Index - b.Index })
	out := make([]StreamStats, 0, len(list))
	for _, e := range list {
		e.Legs = [2]LegStats{e.st.io[A].legStats(), e.st.io[B].legStats()}
		out = append(out, e.StreamStats)
	}
	return out
}

// streamFor returns the stream of section i, made on first use. Called
// with s.mu held.
func (s *Session) streamFor(i int, kind string) *stream {
	if st := s.streams[i]; st != nil {
		st.kind = kind // a section a re-offer reused for another stream (RFC 3264 §8.3.3)
		return st
	}
	st := &stream{index: i, kind: kind}
	for l := range 2 {
		st.io[l].rw.pass = true
		st.fwd[l] = forwarder{in: &st.io[l], out: &st.io[1-l], policy: s.policy, latchN: s.latchN}
	}
	if s.streams == nil {
		s.streams = map[int]*stream{}
	}
	s.streams[i] = st
	return st
}

// bindStream binds the stream's ports facing leg l on first use. Called
// with s.mu held.
func (s *Session) bindStream(st *stream, l Leg) (*pair, error) {
	if p := st.pairs[l]; p != nil {
		return p, nil
	}
	p, err := s.bind(l, &st.fwd[l])
	if err != nil {
		return nil, err
	}
	st.pairs[l] = p
	return p, nil
}

// offerStreams takes the sections of an offer from leg from besides the
// audio one and returns what the box offers the other leg for those it
// relays; the rest are offered with port 0. A stream the box cannot key
// as the leg's SRTP policy wants is rejected, not the call. Called with
// s.mu held.
func (s *Session) offerStreams(from Leg, p *sdprewrite.SDP) map[int]sdprewrite.Stream {
	to := Other(from)
	for _, st := range s.streams {
		st.offer = nil
	}
	var out map[int]sdprewrite.Stream
	for i, sec := range p.Sections {
		if i == p.AudioIndex || !sec.Relayable() || len(out) == MaxStreams {
			continue
		}
		var crypto *sdprewrite.Crypto
		if s.srtpPol[from] != SRTPOff && len(sec.Crypto) > 0 {
			c := sec.Crypto[0]
			crypto = &c
		}
		if crypto == nil && (sdprewrite.IsSecure(sec.Proto) || s.srtpPol[from] == SRTPRequire) {
			s.r.log.Debug("media/relay: stream rejected: no usable a=crypto", "session", s.id, "leg", legName(from),
				"stream", i, "kind", sec.Kind, "srtp", s.srtpPol[from])
			continue
		}
		st := s.streamFor(i, sec.Kind)
		pr, err := s.bindStream(st, to)
		if err != nil {
			s.r.log.Warn("media/relay: stream rejected", "session", s.id, "stream", i, "kind", sec.Kind, "err", err)
			continue
		}
		var sent []sdprewrite.Crypto
		if s.srtpPol[to] != SRTPOff {
			sent = keysFor(&st.own[to])
		}
		dir := effectiveDir(sec.Media)
		st.offer = &streamOffer{from: from, sec: sec, dir: dir, crypto: crypto, sentCrypto: sent}
		if out == nil {
			out = map[int]sdprewrite.Stream{}
		}
		out[i] = sdprewrite.Stream{Port: pr.port, Proto: sdprewrite.Profile(sec.Proto, sent != nil), Direction: dir, Crypto: sent}
	}
	return out
}

// answerStreams takes the answer from leg from to the streams of the
// pending offer and returns what the box answers the offerer: a stream
// the answerer rejected (port 0), answered with what the box cannot
// relay, or without the SRTP its leg needs, is rejected on both legs and
// stops relaying. Called with s.mu held.
func (s *Session) answerStreams(from Leg, p *sdprewrite.SDP) map[int]sdprewrite.Stream {
	off := Other(from)
	var out map[int]sdprewrite.Stream
	for i, st := range s.streams {
		o := st.offer
		if o == nil || o.from != off || i >= len(p.Sections) || i == p.AudioIndex || !p.Sections[i].Relayable() {
			s.stopStream(st)
			continue
		}
		ans := p.Sections[i]
		var ansSRTP, offSRTP *legSRTP
		if o.sentCrypto != nil {
			if a, own, ok := answerCrypto(ans.Crypto, o.sentCrypto); ok {
				ansSRTP = &legSRTP{suite: a.Suite, tag: a.Tag, rxKey: a.Key, txKey: own.Key}
			}
		}
		if ansSRTP == nil && (sdprewrite.IsSecure(ans.Proto) || s.srtpPol[from] == SRTPRequire) {
			s.stopStream(st)
			continue
		}
		var reply []sdprewrite.Crypto
		if c := o.crypto; c != nil {
			k := keyFor(&st.own[off], c.Suite)
			k.Tag = c.Tag
			reply = []sdprewrite.Crypto{k}
			offSRTP = &legSRTP{suite: c.Suite, tag: c.Tag, rxKey: c.Key, txKey: k.Key}
		}
		pr, err := s.bindStream(st, off)
		if err == nil {
			err = s.installSRTP(off, st.kind, &st.io[off], &st.srtp[off], offSRTP)
		}
		if err == nil {
			err = s.installSRTP(from, st.kind, &st.io[from], &st.srtp[from], ansSRTP)
		}
		if err != nil {
			s.r.log.Warn("media/relay: stream rejected", "session", s.id, "stream", i, "kind", st.kind, "err", err)
			s.stopStream(st)
			continue
		}
		ansDir := effectiveDir(ans.Media)
		s.commitStream(st, off, o.sec, o.dir)
		s.commitStream(st, from, ans, ansDir)
		st.publish(A)
		st.publish(B)
		if out == nil {
			out = map[int]sdprewrite.Stream{}
		}
		out[i] = sdprewrite.Stream{
			Port: pr.port, Proto: o.sec.Proto, Crypto: reply,
			Direction: sdprewrite.Make(ansDir.Sends() && o.dir.Receives(), ansDir.Receives() && o.dir.Sends()),
		}
	}
	return out
}

// stopStream stops relaying a stream (its ports stay bound until the
// session ends, for a re-offer that enables it again). Called with s.mu
// held.
func (s *Session) stopStream(st *stream) {
	st.neg = [2]*streamNeg{}
	for l := range 2 {
		st.io[l].conf.Store(nil)
	}
}

// commitStream records what an offer/answer settled for a stream on leg
// l, as commit does for the audio. Called with s.mu held.
func (s *Session) commitStream(st *stream, l Leg, sec sdprewrite.Section, dir sdprewrite.Direction) {
	n := &streamNeg{dir: dir, rate: 90000}
	if len(sec.Codecs) > 0 && sec.Codecs[0].Rate > 0 {
		n.rate = sec.Codecs[0].Rate
	}
	var prevSig *sigAddrs
	var prevGen uint64
	if prev := st.neg[l]; prev != nil {
		prevSig, prevGen = &prev.sig, prev.gen
	}
	n.sig, n.gen = s.settle(&st.io[l], sec.Media, prevSig, prevGen)
	st.neg[l] = n
}

// publish builds the forwarding configuration of the stream for media
// from leg l: every payload type passes unchanged.
func (st *stream) publish(l Leg) {
	from, to := st.neg[l], st.neg[Other(l)]
	io := &st.io[l]
	io.statsMu.Lock()
	io.stats.SetClockRate(from.rate)
	io.statsMu.Unlock()
	io.conf.Store(&legConf{
		gen:           from.gen,
		signalled:     from.sig.rtp,
		signalledRTCP: from.sig.rtcp,
		relay:         from.dir.Sends() && to.dir.Receives(),
		table:         identityTable(),
		clockRate:     from.rate,
	})
}
