package relay

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/outpost/outpost/media/sdprewrite"
)

// Leg names one side of a session: A (usually the caller's side) or B.
// It is an alias of int, so callers convert to it from their own leg
// type: the gateway may not import this package (docs/design.md §2) and declares
// its own (b2bua.Leg, in b2bua.Anchor), and the appliance adapts a
// Session to that interface with relay.Leg(from).
type Leg = int

// The two legs.
const (
	A Leg = 0
	B Leg = 1
)

// Other returns the opposite leg.
func Other(l Leg) Leg { return 1 - l }

// legName returns "A" or "B" for messages.
func legName(l Leg) string {
	if l == A {
		return "A"
	}
	return "B"
}

func validLeg(l Leg) bool { return l == A || l == B }

// SessionConfig describes a new session.
type SessionConfig struct {
	// ID names the session in logs (e.g. the A leg's Call-ID).
	ID string
	// LocalA and LocalB are the box's addresses facing each leg: the
	// ports for a leg are bound there and the SDP sent to that leg
	// announces it.
	LocalA, LocalB netip.Addr
	// OnInactive is called once, on a goroutine of the relay, when an
	// established session that is not on hold receives no RTP from a leg
	// for Config.InactivityTimeout. It may call Close.
	OnInactive func(reason string)
	// SRTP is each leg's SRTP policy (indexed by Leg); an empty entry
	// takes Config.SRTP. The appliance sets it per route and interface.
	SRTP [2]SRTPPolicy
}

// LegStats are the receive statistics of one leg (media from that leg).
type LegStats struct {
	Packets  uint64  // RTP packets accepted from the leg
	Bytes    uint64  // their bytes
	Expected uint64  // RFC 3550 A.3
	Lost     int64   // RFC 3550 A.3 cumulative lost (negative with duplicates)
	Jitter   float64 // RFC 3550 A.8 interarrival jitter, ms
	Relayed  uint64  // RTP packets sent on to the other leg
	RTCP     uint64  // RTCP packets relayed
	Refused  uint64  // packets refused by the latching policy
	Dropped  uint64  // accepted but not relayed (hold, no peer yet, not RTP, SRTP replay)
	Port     int     // the box's RTP port facing the leg (0 = none allocated)
	// SRTP is the leg's SDES suite ("" = plain RTP); SRTPAuthFailures
	// counts SRTP/SRTCP packets from the leg dropped because they did not
	// authenticate (tampered, truncated, wrong key).
	SRTP             string
	SRTPAuthFailures uint64
	// MusicOnHold counts the music-on-hold packets the box sent the leg
	// while the other held the call.
	MusicOnHold uint64
}

// negotiated is what one offer/answer settled for a leg.
type negotiated struct {
	media sdprewrite.Media     // the leg's last SDP (audio part)
	dir   sdprewrite.Direction // effective: c=0.0.0.0 hold folded in
	codec sdprewrite.Codec     // the audio codec on this leg (leg's own PT)
	te    sdprewrite.Codec     // telephone-event on this leg, PT 0 + empty name if none
	// recvPTs are the payload types the leg uses toward the box: those in
	// the SDP the box sent it (RFC 3264 §5.1).
	recvCodec, recvTE sdprewrite.Codec
	gen               uint64
	// hold: the leg's own re-offer said it will not receive (a hold, for
	// music on hold); never set by an answer or a call's first offer.
	hold bool
	// sig is where the leg receives, and the source latching expects: its
	// SDP's address, or on an RFC 2543 hold (c=0.0.0.0) the one it
	// signalled last, so that its music on hold is still taken.
	sig sigAddrs
}

// pendingOffer is the last offer, kept for its answers (early media and
// forks may answer the same offer more than once).
type pendingOffer struct {
	from   Leg
	media  sdprewrite.Media
	dir    sdprewrite.Direction
	native []sdprewrite.Codec // offerer's codecs that are allowed, preference order
	sent   []sdprewrite.Codec // what the box offered to the other leg
	// SDES: the offerer's a=crypto the box accepts (nil = plain on the
	// offerer's leg) and the box's lines offered to the other leg (nil =
	// plain offered).
	crypto     *sdprewrite.Crypto
	sentCrypto []sdprewrite.Crypto
}

// sentSDP is the o= state of the SDP the box sends on one leg.
type sentSDP struct {
	sessID  string
	version uint64
	last    []byte // last body sent, o= line excluded
}

// Session relays one call's audio between leg A and leg B.
type Session struct {
	r          *Relay
	id         string
	local      [2]netip.Addr
	onInactive func(string)
	codecs     []string
	policy     Latching
	latchN     int
	timeout    time.Duration
	batch      int
	srtpPol    [2]SRTPPolicy

	io  [2]legIO
	fwd [2]forwarder
	wg  sync.WaitGroup // goroutine readers

	poller *poller // the relay poller serving the session's polled sockets (set with mu held)

	mu       sync.Mutex
	closed   bool
	pairs    [2]*pair
	neg      [2]*negotiated
	offer    *pendingOffer
	sent     [2]sentSDP
	gen      uint64
	teOut    [2]uint8               // telephone-event PT used toward each leg, 0 = none yet
	own      [2][]sdprewrite.Crypto // the box's SDES keys toward each leg (ownKeys)
	srtpNeg  [2]*legSRTP            // SRTP in force per leg, nil = plain
	inactive struct {
		fired     bool
		rebase    bool
		lastCount [2]uint64
		lastSeen  [2]time.Time
	}

	moh     []byte        // Config.MusicOnHold at the session's start
	players [2]*mohPlayer // music on hold playing to each leg (moh.go), under mu
	heldFor [2]bool       // the box holds for the leg (HoldFor)

	streams      map[int]*stream // relayed m= sections besides the audio one, by index (streams.go)
	finalStreams []StreamStats   // their figures once closed

	closeOnce sync.Once
	final     [2]LegStats
}

// NewSession creates a session. No port is bound until an SDP needs one.
func (r *Relay) NewSession(sc SessionConfig) (*Session, error) {
	for i, a := range []netip.Addr{sc.LocalA, sc.LocalB} {
		if !a.IsValid() || a.IsUnspecified() {
			return nil, r.errorf("session %s: local address of leg %s %v: need a specific address", sc.ID, legName(i), a)
		}
	}
	cfg := r.Config()
	s := &Session{
		r: r, id: sc.ID, local: [2]netip.Addr{sc.LocalA.Unmap(), sc.LocalB.Unmap()}, onInactive: sc.OnInactive,
		codecs: cfg.Codecs, policy: cfg.Latching, latchN: cfg.LatchPackets, timeout: cfg.InactivityTimeout, batch: cfg.Batch,
		moh: cfg.MusicOnHold,
	}
	for l := range 2 {
		s.srtpPol[l] = sc.SRTP[l]
		if s.srtpPol[l] == "" {
			s.srtpPol[l] = cfg.SRTP
		}
		if err := s.srtpPol[l].check(); err != nil {
			return nil, r.errorf("session %s: leg %s: %w", sc.ID, legName(l), err)
		}
	}
	for l := range 2 {
		s.io[l].rw.pub = &s.io[l].ssrc
		s.fwd[l] = forwarder{in: &s.io[l], out: &s.io[1-l], policy: s.policy, latchN: s.latchN}
		s.sent[l].sessID = strconv.FormatUint(randUint63(), 10)
		s.sent[l].version = 1
	}
	if err := r.addSession(s); err != nil {
		return nil, err
	}
	return s, nil
}

func randUint63() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) >> 33 // short enough to read in logs
}

// ID returns the session's ID.
func (s *Session) ID() string { return s.id }

func (s *Session) errorf(format string, args ...any) error {
	return fmt.Errorf("media/relay: session "+s.id+": "+format, args...)
}

// ensurePair binds the audio ports facing leg l if it has none yet and
// starts their readers. Called with s.mu held.
func (s *Session) ensurePair(l Leg) (*pair, error) {
	if p := s.pairs[l]; p != nil {
		return p, nil
	}
	p, err := s.bind(l, &s.fwd[l])
	if err != nil {
		return nil, err
	}
	s.pairs[l] = p
	return p, nil
}

// bind binds a pair of ports facing leg l, read by forwarder f (whose in
// is the leg's legIO), and starts their readers. Called with s.mu held.
func (s *Session) bind(l Leg, f *forwarder) (*pair, error) {
	polled := pollSupported && !s.r.portableReaders && s.batch <= 1
	p, err := s.r.ports.allocate(s.local[l], polled)
	if err != nil {
		return nil, s.errorf("leg %s: %w", legName(l), err)
	}
	if polled { // the relay's pollers read the sockets (poll_linux.go)
		if s.poller == nil {
			s.poller = s.r.polls.forSession()
		}
		if err := s.poller.add(s, f, p); err != nil {
			s.r.ports.release(p)
			return nil, s.errorf("leg %s: %w", legName(l), err)
		}
		f.in.pair.Store(p)
		return p, nil
	}
	f.in.pair.Store(p)
	s.wg.Add(2)
	if batchSupported && !s.r.portableReaders {
		n := max(s.batch, 1)
		go s.readBatched(f, p.rtp, false, n)
		go s.readBatched(f, p.rtcp, true, n)
	} else {
		go s.readRTP(f, p)
		go s.readRTCP(f, p)
	}
	return p, nil
}

// isG711 reports whether c is PCMU or PCMA.
func isG711(c sdprewrite.Codec) bool { return c.Is("PCMU") || c.Is("PCMA") }

func isTE(c sdprewrite.Codec) bool { return c.Is("telephone-event") }

// SetSRTP changes leg l's SRTP policy ("" = Config.SRTP) for the offers
// and answers that follow; SRTP already in force on the leg stays until
// the next offer/answer. The appliance calls it once the call's route is
// known, before the first offer.
func (s *Session) SetSRTP(l Leg, p SRTPPolicy) error {
	if l != A && l != B {
		return s.errorf("leg %d", l)
	}
	if p == "" {
		p = s.r.Config().SRTP
	}
	if err := p.check(); err != nil {
		return s.errorf("leg %s: %w", legName(l), err)
	}
	s.mu.Lock()
	s.srtpPol[l] = p
	s.mu.Unlock()
	return nil
}

// effectiveDir folds RFC 2543 hold (c=0.0.0.0: "do not send to me") into
// the direction.
func effectiveDir(m sdprewrite.Media) sdprewrite.Direction {
	if m.Hold {
		return sdprewrite.Make(m.Direction.Sends(), false)
	}
	return m.Direction
}

func parseAudio(sdp []byte) (*sdprewrite.SDP, error) {
	p, err := sdprewrite.Parse(sdp)
	if err != nil {
		return nil, err
	}
	if p.Audio.Port == 0 {
		return nil, errors.New("audio stream rejected (port 0)")
	}
	switch p.Audio.Proto {
	case "RTP/AVP", "RTP/AVPF", "RTP/SAVP", "RTP/SAVPF":
	default:
		return nil, fmt.Errorf("transport %q not relayed (only RTP/AVP and RTP/SAVP)", p.Audio.Proto)
	}
	return p, nil
}

// Offer takes an SDP offer that leg from sent (INVITE, re-INVITE, or an
// UPDATE) and returns the SDP to offer to the other leg: the box's
// address and ports facing that leg, the allowed codecs in preference
// order (plus the other G.711 law when only one is offered and both are
// allowed), telephone-event, and from's direction. It binds the ports
// facing the other leg on first use. ErrNotAcceptable means 488.
func (s *Session) Offer(from Leg, sdp []byte) ([]byte, error) {
	if !validLeg(from) {
		return nil, s.errorf("offer from invalid leg %d", from)
	}
	p, err := parseAudio(sdp)
	if err != nil {
		return nil, s.errorf("offer from leg %s: %w: %w", legName(from), ErrNotAcceptable, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, s.errorf("offer: %w", ErrClosed)
	}
	to := Other(from)
	// SDES on the offerer's leg: its first usable a=crypto (the offerer's
	// preference), unless the leg's policy is off.
	var fromCrypto *sdprewrite.Crypto
	if s.srtpPol[from] != SRTPOff && len(p.Audio.Crypto) > 0 {
		c := p.Audio.Crypto[0]
		fromCrypto = &c
	}
	switch {
	case fromCrypto == nil && sdprewrite.IsSecure(p.Audio.Proto):
		return nil, s.errorf("offer from leg %s: %w: %s without a usable a=crypto (%d lines, SRTP %s)",
			legName(from), ErrNotAcceptable, p.Audio.Proto, p.Audio.CryptoLines, s.srtpPol[from])
	case fromCrypto == nil && s.srtpPol[from] == SRTPRequire:
		return nil, s.errorf("offer from leg %s: %w: SRTP required, offer has no usable a=crypto", legName(from), ErrNotAcceptable)
	}
	native := sdprewrite.Intersect(p.Audio.Codecs, s.codecs)
	var audio []sdprewrite.Codec
	var te *sdprewrite.Codec
	for i, c := range native {
		switch {
		case isTE(c):
			if te == nil {
				te = &native[i]
			}
		default:
			audio = append(audio, c)
		}
	}
	if len(audio) == 0 {
		return nil, s.errorf("offer from leg %s: %w: no allowed audio codec in %v", legName(from), ErrNotAcceptable, names(p.Audio.Codecs))
	}
	out := append([]sdprewrite.Codec(nil), audio...)
	// Transcoding: offer the other law too, so that a µ-law phone can
	// reach an A-law-only gateway (and the reverse).
	_, hasU := sdprewrite.Find(audio, "PCMU")
	_, hasA := sdprewrite.Find(audio, "PCMA")
	if hasU != hasA && s.allowed("PCMU") && s.allowed("PCMA") {
		other := sdprewrite.Codec{PT: 8, Name: "PCMA", Rate: 8000}
		if hasA {
			other = sdprewrite.Codec{PT: 0, Name: "PCMU", Rate: 8000}
		}
		if !ptTaken(out, other.PT) {
			out = append(out, other)
		}
	}
	if te != nil {
		c := *te
		// RFC 3264 §8.3.2: keep the payload type used on that leg before.
		if pt := s.teOut[to]; pt != 0 && !ptTaken(out, pt) {
			c.PT = pt
		}
		if ptTaken(out, c.PT) {
			c.PT = freeDynamicPT(out)
		}
		out = append(out, c)
	}
	pr, err := s.ensurePair(to)
	if err != nil {
		return nil, err
	}
	var sentCrypto []sdprewrite.Crypto
	if s.srtpPol[to] != SRTPOff {
		sentCrypto = s.ownKeys(to)
	}
	dir := effectiveDir(p.Audio)
	sentDir := dir
	if dir == sdprewrite.Inactive && s.neg[from] != nil && len(s.moh) > 0 {
		sentDir = sdprewrite.SendOnly // the box plays music on hold to the other leg
	}
	streams := s.offerStreams(from, p)
	body := s.write(to, p, pr.port, out, sentDir, sdprewrite.Profile(p.Audio.Proto, sentCrypto != nil), sentCrypto, streams)
	s.offer = &pendingOffer{from: from, media: p.Audio, dir: dir, native: native, sent: out, crypto: fromCrypto, sentCrypto: sentCrypto}
	return body, nil
}

// Answer takes the SDP answer that leg from sent (183, 200, or the answer
// to a re-INVITE) to the last Offer from the other leg, and returns the
// SDP to answer that leg with. It settles the codecs of both legs (and
// transcoding), the payload type mappings, the directions (hold/resume),
// and the signalled addresses, and binds the ports facing the offerer on
// first use. It may be called again for the same offer (a 200 after a
// 183, another fork). ErrNotAcceptable: nothing offered was accepted.
func (s *Session) Answer(from Leg, sdp []byte) ([]byte, error) {
	if !validLeg(from) {
		return nil, s.errorf("answer from invalid leg %d", from)
	}
	p, err := parseAudio(sdp)
	if err != nil {
		return nil, s.errorf("answer from leg %s: %w: %w", legName(from), ErrNotAcceptable, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, s.errorf("answer: %w", ErrClosed)
	}
	o := s.offer
	if o == nil || o.from == from {
		return nil, s.errorf("answer from leg %s: %w", legName(from), ErrNoOffer)
	}
	off := o.from
	// The answerer's codec: its first audio format that the box offered.
	var ansCodec, ansTE sdprewrite.Codec
	var haveCodec, haveTE bool
	for _, c := range p.Audio.Codecs {
		_, offered := findSame(o.sent, c)
		switch {
		case !offered:
		case isTE(c) && !haveTE:
			ansTE, haveTE = c, true
		case !isTE(c) && !haveCodec:
			ansCodec, haveCodec = c, true
		}
	}
	if !haveCodec {
		return nil, s.errorf("answer from leg %s: %w: answer %v has none of the offered %v", legName(from), ErrNotAcceptable, names(p.Audio.Codecs), names(o.sent))
	}
	// The offerer's codec: the same one if it offered it, else (the box
	// added the other law) its own G.711 law: transcode.
	offCodec, same := sdprewrite.Find(o.native, ansCodec.Name)
	if !same {
		found := false
		for _, c := range o.native {
			if isG711(c) {
				offCodec, found = c, true
				break
			}
		}
		if !found || !isG711(ansCodec) {
			return nil, s.errorf("answer from leg %s: %w: cannot bridge %s", legName(from), ErrNotAcceptable, ansCodec.Name)
		}
	}
	// SDES on the answerer's leg: its a=crypto must accept one of the
	// box's lines; without one the leg stays plain, unless it must not.
	var ansSRTP, offSRTP *legSRTP
	if o.sentCrypto != nil {
		if a, own, ok := answerCrypto(p.Audio.Crypto, o.sentCrypto); ok {
			ansSRTP = &legSRTP{suite: a.Suite, tag: a.Tag, rxKey: a.Key, txKey: own.Key}
		}
	}
	switch {
	case ansSRTP == nil && sdprewrite.IsSecure(p.Audio.Proto):
		return nil, s.errorf("answer from leg %s: %w: %s without an a=crypto accepting the offer's", legName(from), ErrNotAcceptable, p.Audio.Proto)
	case ansSRTP == nil && s.srtpPol[from] == SRTPRequire:
		return nil, s.errorf("answer from leg %s: %w: SRTP required, answer has no usable a=crypto", legName(from), ErrNotAcceptable)
	}
	// SDES on the offerer's leg: accept its chosen line with the box's
	// key for that suite, under the offer's tag (RFC 4568 §7.1.2).
	var replyCrypto []sdprewrite.Crypto
	if c := o.crypto; c != nil {
		k := s.ownKey(off, c.Suite)
		k.Tag = c.Tag
		replyCrypto = []sdprewrite.Crypto{k}
		offSRTP = &legSRTP{suite: c.Suite, tag: c.Tag, rxKey: c.Key, txKey: k.Key}
	}
	offTE, offHasTE := sdprewrite.Find(o.native, "telephone-event")
	haveTE = haveTE && offHasTE
	pr, err := s.ensurePair(off)
	if err != nil {
		return nil, err
	}
	// What each leg sends to the box uses the payload types of the SDP
	// the box sent it (RFC 3264 §5.1): the offerer gets this answer with
	// its own numbers; the answerer got the box's offer.
	sentAns, _ := findSame(o.sent, ansCodec)
	sentTE, _ := sdprewrite.Find(o.sent, "telephone-event")
	ansDir := effectiveDir(p.Audio)
	negOff := &negotiated{media: o.media, dir: o.dir, codec: offCodec, recvCodec: offCodec,
		hold: s.neg[off] != nil && !o.dir.Receives()}
	negAns := &negotiated{media: p.Audio, dir: ansDir, codec: ansCodec, recvCodec: sentAns}
	if haveTE {
		negOff.te, negOff.recvTE = offTE, offTE
		negAns.te, negAns.recvTE = ansTE, sentTE
		s.teOut[from] = sentTE.PT
		s.teOut[off] = offTE.PT
	}
	if err := s.commitSRTP(off, offSRTP); err != nil {
		return nil, err
	}
	if err := s.commitSRTP(from, ansSRTP); err != nil {
		return nil, err
	}
	s.commit(off, negOff)
	s.commit(from, negAns)

	reply := []sdprewrite.Codec{offCodec}
	if haveTE {
		reply = append(reply, offTE)
	}
	// The box answers the offerer with what the answerer does, within
	// what the offer allows (RFC 3264 §6.1): the answerer's direction,
	// except after an inactive hold that the box offered on as sendonly
	// (music on hold), answered inactive. The answer keeps the offer's
	// profile (RFC 3264 §6).
	replyDir := sdprewrite.Make(ansDir.Sends() && o.dir.Receives(), ansDir.Receives() && o.dir.Sends())
	return s.write(off, p, pr.port, reply, replyDir, o.media.Proto, replyCrypto, s.answerStreams(from, p)), nil
}

// findSame returns the codec of list with c's name (and, for several of
// the same name, c's payload type if present).
func findSame(list []sdprewrite.Codec, c sdprewrite.Codec) (sdprewrite.Codec, bool) {
	var first sdprewrite.Codec
	found := false
	for _, x := range list {
		if x.Is(c.Name) {
			if x.PT == c.PT {
				return x, true
			}
			if !found {
				first, found = x, true
			}
		}
	}
	return first, found
}

// commit records a leg's negotiation and publishes both legs' forwarding
// configuration. Called with s.mu held.
func (s *Session) commit(l Leg, n *negotiated) {
	var prevSig *sigAddrs
	var prevGen uint64
	if prev := s.neg[l]; prev != nil {
		prevSig, prevGen = &prev.sig, prev.gen
	}
	n.sig, n.gen = s.settle(&s.io[l], n.media, prevSig, prevGen)
	s.neg[l] = n
	if s.neg[Other(l)] != nil {
		s.publish(A)
		s.publish(B)
		s.updateMOH()
		s.resetInactivity()
	}
}

type sigAddrs struct{ rtp, rtcp netip.AddrPort }

// settle returns where a leg receives after its SDP m (prev: before it,
// nil for its first) and the latching generation: a new one, with io's
// destinations reset to the signalled addresses until a packet says
// otherwise, when those changed. Called with s.mu held.
func (s *Session) settle(io *legIO, m sdprewrite.Media, prev *sigAddrs, prevGen uint64) (sigAddrs, uint64) {
	sig := signalled(m)
	if m.Hold && prev != nil {
		sig = *prev // RFC 2543 hold: "do not send to me", not "I moved"
	}
	if prev != nil && *prev == sig {
		return sig, prevGen
	}
	s.gen++
	rtp, rtcp := sig.rtp, sig.rtcp
	io.peerRTP.Store(&rtp)
	io.peerRTCP.Store(&rtcp)
	return sig, s.gen
}

// signalled returns where a leg said it receives RTP and RTCP (RFC 3605
// a=rtcp, else port + 1; nothing on hold).
func signalled(m sdprewrite.Media) sigAddrs {
	if !m.Addr.IsValid() || m.Hold {
		return sigAddrs{}
	}
	rtcpAddr, rtcpPort := m.Addr, m.Port+1
	if m.RTCPPort != 0 {
		rtcpPort = m.RTCPPort
		if m.RTCPAddr.IsValid() {
			rtcpAddr = m.RTCPAddr
		}
	}
	return sigAddrs{
		rtp:  netip.AddrPortFrom(m.Addr.Unmap(), uint16(m.Port)),
		rtcp: netip.AddrPortFrom(rtcpAddr.Unmap(), uint16(rtcpPort)),
	}
}

// publish builds the forwarding configuration for media from leg l.
func (s *Session) publish(l Leg) {
	from, to := s.neg[l], s.neg[Other(l)]
	t := identityTable()
	op := uint8(opPass)
	switch {
	case from.codec.Is("PCMU") && to.codec.Is("PCMA"):
		op = opUlawToAlaw
	case from.codec.Is("PCMA") && to.codec.Is("PCMU"):
		op = opAlawToUlaw
	}
	// A leg should send with the numbers of the SDP the box sent it, but
	// many send with the numbers of their own SDP: accept both.
	t[from.codec.PT&0x7F] = ptRule{out: to.codec.PT, op: op}
	t[from.recvCodec.PT&0x7F] = ptRule{out: to.codec.PT, op: op}
	// The static number of the leg's law is mapped too, for phones that
	// ignore the SDP's numbering. A packet in the other law's static type
	// is left as it is: it is already in the law that type names.
	if op != opPass {
		static := uint8(0)
		if from.codec.Is("PCMA") {
			static = 8
		}
		t[static] = ptRule{out: to.codec.PT, op: op}
	}
	if from.te.Name != "" && to.te.Name != "" {
		t[from.te.PT&0x7F] = ptRule{out: to.te.PT, op: opPass}
		t[from.recvTE.PT&0x7F] = ptRule{out: to.te.PT, op: opPass}
	}
	sig := from.sig
	rate := from.codec.Rate
	if rate <= 0 {
		rate = 8000
	}
	c := &legConf{
		gen:           from.gen,
		signalled:     sig.rtp,
		signalledRTCP: sig.rtcp,
		relay:         from.dir.Sends() && to.dir.Receives() && !s.wantsMOH(Other(l)) && !s.heldFor[Other(l)],
		table:         t,
		clockRate:     rate,
	}
	io := &s.io[l]
	io.statsMu.Lock()
	io.stats.SetClockRate(rate)
	io.statsMu.Unlock()
	io.conf.Store(c)
}

// held reports whether either direction is stopped by the SDP (hold).
// Called with s.mu held.
func (s *Session) held() bool {
	if s.neg[A] == nil || s.neg[B] == nil {
		return true // not established yet
	}
	for l := range 2 {
		if c := s.io[l].conf.Load(); c == nil || !c.relay {
			return true
		}
	}
	return false
}

// resetInactivity restarts the silence clocks (after an offer/answer).
// Called with s.mu held.
func (s *Session) resetInactivity() { s.inactive.rebase = true }

// checkInactive is the relay's periodic look at the session: it reports a
// reason once when a leg has sent no RTP for the timeout while the
// session is established and not on hold. Packet counters, not
// timestamps, are compared, so the forwarding path never reads a clock
// for this.
func (s *Session) checkInactive(now time.Time) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := &s.inactive
	if s.timeout <= 0 || s.closed || in.fired {
		return "", false
	}
	var counts [2]uint64
	for l := range 2 {
		counts[l] = s.io[l].rtpIn.Load()
	}
	if s.held() || in.rebase {
		// On hold (or just renegotiated) silence is expected: restart
		// both clocks.
		in.rebase = false
		in.lastCount, in.lastSeen = counts, [2]time.Time{now, now}
		return "", false
	}
	for l := range 2 {
		if counts[l] != in.lastCount[l] {
			in.lastCount[l], in.lastSeen[l] = counts[l], now
		} else if now.Sub(in.lastSeen[l]) >= s.timeout {
			in.fired = true
			return fmt.Sprintf("no RTP from leg %s for %v", legName(l), s.timeout), true
		}
	}
	return "", false
}
