package relay

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/outpost/outpost/media/g711"
	"github.com/outpost/outpost/media/rtpstats"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
)

// What to do with one RTP payload type arriving from a leg.
const (
	opPass       = iota // forward, payload type rewritten to rule.out
	opUlawToAlaw        // transcode µ-law → A-law (media/g711), then as opPass
	opAlawToUlaw        // transcode A-law → µ-law
	opDrop              // not negotiated and not forwardable
)

type ptRule struct {
	out uint8
	op  uint8
}

// fwdTable maps every payload type (7 bits) from one leg to the other.
type fwdTable [128]ptRule

// identityTable forwards every payload type unchanged.
func identityTable() fwdTable {
	var t fwdTable
	for i := range t {
		t[i] = ptRule{out: uint8(i), op: opPass}
	}
	return t
}

// legConf is what the forwarding path needs about one leg, as negotiated
// by the last offer/answer. It is immutable: Offer/Answer publish a new
// one with an atomic store, the readers load it once per packet.
type legConf struct {
	gen           uint64         // changes when the leg's signalled address changes
	signalled     netip.AddrPort // RTP address the leg announced (invalid on hold/none)
	signalledRTCP netip.AddrPort
	relay         bool     // forward RTP from this leg to the other (directions allow it)
	table         fwdTable // payload types from this leg → the other leg's
	clockRate     int
}

// latch is the source-address state of one socket (RTP or RTCP) of a
// leg. It is owned by that socket's reader goroutine.
type latch struct {
	gen    uint64
	locked bool
	count  int
	peer   netip.AddrPort
}

// accept applies the latching policy to a packet from src and reports
// whether it is taken. When the learned address changes it is published
// through pub (the address the other leg's reader sends to) unless pub is
// nil.
func (lt *latch) accept(src netip.AddrPort, gen uint64, signalled netip.AddrPort, policy Latching, n int, pub *atomic.Pointer[netip.AddrPort]) bool {
	if lt.gen != gen { // new SDP from the leg: learn again
		*lt = latch{gen: gen}
	}
	src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
	if policy == LatchSignalled || lt.locked {
		if policy == LatchSignalled {
			return src == signalled
		}
		return src == lt.peer
	}
	// LatchFirstPackets, still learning: follow the newest source, lock
	// at once on the signalled address, else after n packets.
	if src != lt.peer {
		lt.peer = src
		if pub != nil {
			a := src
			pub.Store(&a) // rare: once per change of source while learning
		}
	}
	lt.count++
	if src == signalled || lt.count >= n {
		lt.locked = true
	}
	return true
}

// rewriter keeps the stream sent to a leg continuous (RFC 3550 §5.1,
// §8.2: one SSRC with increasing sequence numbers and timestamps) when
// the source changes its SSRC (a re-INVITE to another device, a forked
// early dialog, a phone restarting its stream). While the SSRC stays the
// same, packets pass untouched. Owned by the leg's RTP reader.
type rewriter struct {
	started        bool
	in, out        uint32 // SSRC received, SSRC sent
	seqOff         uint16
	tsOff          uint32
	lastSeq        uint16 // last sequence number and timestamp sent
	lastTS         uint32
	step           uint32 // timestamp increment per packet, learned
	pub            *atomic.Pointer[ssrcMap]
	hasSent, remap bool
	// pass leaves every packet as it came: streams other than the audio
	// one carry several SSRCs by design (RFC 4588 retransmission,
	// simulcast), which a rewrite to one SSRC would break.
	pass bool
}

// ssrcMap is the rewriter's mapping, published for the RTCP reader.
type ssrcMap struct {
	in, out uint32
	tsOff   uint32
}

// apply rewrites RTP header h (parsed from the packet being forwarded)
// and reports whether it changed anything that must be written back.
func (w *rewriter) apply(h *rtp.Header) (changed bool) {
	if w.pass {
		return false
	}
	seq, ts, ssrc := h.SequenceNumber, h.Timestamp, h.SSRC
	switch {
	case !w.started:
		w.started, w.in, w.out = true, ssrc, ssrc
	case ssrc != w.in:
		// A new source continues where the old one stopped: next
		// sequence number, timestamp one packet later, marker set
		// (RFC 3551 §4.1: start of a talkspurt).
		step := w.step
		if step == 0 {
			step = 160 // 20 ms at 8 kHz
		}
		w.in = ssrc
		w.seqOff = w.lastSeq + 1 - seq
		w.tsOff = w.lastTS + step - ts
		w.remap = w.in != w.out || w.seqOff != 0 || w.tsOff != 0
		h.Marker, changed = true, true
		if w.pub != nil {
			w.pub.Store(&ssrcMap{in: w.in, out: w.out, tsOff: w.tsOff}) // once per source change
		}
	}
	oseq, ots := seq+w.seqOff, ts+w.tsOff
	if w.remap {
		h.SequenceNumber, h.Timestamp, h.SSRC = oseq, ots, w.out
		changed = true
	}
	if !w.hasSent {
		w.hasSent, w.lastSeq, w.lastTS = true, oseq, ots
		return changed
	}
	if d := oseq - w.lastSeq; d != 0 && d < 0x8000 { // newer packet
		if dt := ots - w.lastTS; dt > 0 && dt < 1<<20 {
			w.step = dt / uint32(d)
		}
		w.lastSeq, w.lastTS = oseq, ots
	}
	return changed
}

// legIO is the per-leg state the forwarding path touches. Fields written
// by the leg's own readers only are plain; the rest are atomics.
type legIO struct {
	conf     atomic.Pointer[legConf]
	pair     atomic.Pointer[pair]           // the box's sockets facing this leg
	peerRTP  atomic.Pointer[netip.AddrPort] // where the box sends this leg's RTP
	peerRTCP atomic.Pointer[netip.AddrPort]
	ssrc     atomic.Pointer[ssrcMap]   // RTP rewrite toward the other leg, for RTCP
	rx       atomic.Pointer[cryptoCtx] // SRTP: decrypts what the leg sends; nil = plain
	tx       atomic.Pointer[cryptoCtx] // SRTP: encrypts what the box sends the leg; nil = plain

	rtpLatch, rtcpLatch latch
	rw                  rewriter

	statsMu sync.Mutex
	stats   rtpstats.Receiver

	rtpIn   atomic.Uint64 // accepted RTP packets (inactivity detection)
	relayed atomic.Uint64 // RTP packets sent on to the other leg
	refused atomic.Uint64 // packets from a source the latching policy refused
	dropped atomic.Uint64 // accepted but not relayed (hold, no destination yet, not RTP)
	rtcp    atomic.Uint64 // RTCP packets relayed
	authErr atomic.Uint64 // SRTP/SRTCP packets that did not authenticate
	moh     atomic.Uint64 // music-on-hold packets the box sent this leg
}

// forwarder is one leg's view of the session for the hot path.
type forwarder struct {
	in, out *legIO
	policy  Latching
	latchN  int
	// Reused so that no packet allocates. pkt belongs to the RTP reader:
	// every RTP packet is parsed into it (pion/rtp) and pion/srtp parses
	// into its Header. The rest belong to the RTCP reader: rtcpHdr for
	// pion/srtp, sr and rr for the reports whose SSRC follows the rewrite.
	pkt     rtp.Packet
	rtcpHdr rtcp.Header
	sr      rtcp.SenderReport
	rr      rtcp.ReceiverReport
}

// unprotect counts a packet SRTP refused: a replay (RFC 3711 §3.3.2) is
// dropped like a duplicate, anything else did not authenticate.
func (in *legIO) unprotect(err error) {
	if errors.Is(err, srtp.ErrFailedToVerifyAuthTag) {
		in.authErr.Add(1)
		return
	}
	var dup interface{ Unwrap() error }
	if errors.As(err, &dup) && dup.Unwrap() != nil && dup.Unwrap().Error() == "duplicated packet" {
		in.dropped.Add(1)
		return
	}
	in.authErr.Add(1) // truncated or malformed: not authenticated either
}

// rtp handles one RTP packet p from src that arrived on in's RTP socket
// at nowNs. It rewrites p in place and returns the packet to send (p, or
// p re-encrypted in place and extended by the auth tag into p's spare
// capacity, srtpSlack) and the pair whose RTP socket sends it and the
// address to send it to, or ok false to drop it. It never allocates.
func (f *forwarder) rtp(p []byte, src netip.AddrPort, nowNs int64) (out []byte, from *pair, dst netip.AddrPort, ok bool) {
	in := f.in
	c := in.conf.Load()
	if c == nil {
		in.dropped.Add(1)
		return nil, nil, dst, false
	}
	// SRTP from the leg: authenticate and decrypt in place before
	// anything else reads the packet, so that an unauthenticated packet
	// can neither be relayed nor steer latching.
	if rx := in.rx.Load(); rx != nil {
		dec, err := rx.rtp.DecryptRTP(p, p, &f.pkt.Header)
		if err != nil {
			in.unprotect(err)
			return nil, nil, dst, false
		}
		p = dec
	}
	if !in.rtpLatch.accept(src, c.gen, c.signalled, f.policy, f.latchN, &in.peerRTP) {
		in.refused.Add(1)
		return nil, nil, dst, false
	}
	if !parseRTP(&f.pkt, p) {
		in.dropped.Add(1)
		return nil, nil, dst, false
	}
	h := &f.pkt.Header
	in.statsMu.Lock()
	in.stats.Update(h.SequenceNumber, h.Timestamp, nowNs, len(p))
	in.statsMu.Unlock()
	in.rtpIn.Add(1)
	if !c.relay {
		in.dropped.Add(1)
		return nil, nil, dst, false
	}
	peer, pr := f.out.peerRTP.Load(), f.out.pair.Load()
	rule := c.table[h.PayloadType]
	if peer == nil || !peer.IsValid() || pr == nil || rule.op == opDrop {
		in.dropped.Add(1)
		return nil, nil, dst, false
	}
	changed := in.rw.apply(h)
	if h.PayloadType != rule.out {
		h.PayloadType, changed = rule.out, true
	}
	if changed {
		writeRTPHeader(p, h)
	}
	switch rule.op {
	case opUlawToAlaw:
		g711.UlawToAlawInPlace(f.pkt.Payload)
	case opAlawToUlaw:
		g711.AlawToUlawInPlace(f.pkt.Payload)
	}
	// SRTP to the other leg: encrypt in place with the box's key.
	if tx := f.out.tx.Load(); tx != nil {
		enc, err := tx.rtp.EncryptRTP(p, p, &f.pkt.Header)
		if err != nil { // e.g. 2^48 packets under one key (RFC 3711 §9.2)
			in.dropped.Add(1)
			return nil, nil, dst, false
		}
		p = enc
	}
	in.relayed.Add(1)
	return p, pr, *peer, true
}

// rtcp handles one RTCP packet: latching as for RTP, then the sender
// SSRC (and SR timestamp) of SR/RR packets follows the RTP rewrite.
// RTCP is relayed on hold too (receiver reports keep flowing).
// The packet is sent from the returned pair's RTCP socket.
func (f *forwarder) rtcpPacket(p []byte, src netip.AddrPort) (out []byte, from *pair, dst netip.AddrPort, ok bool) {
	in := f.in
	c := in.conf.Load()
	if c == nil {
		in.refused.Add(1)
		return nil, nil, dst, false
	}
	if rx := in.rx.Load(); rx != nil { // SRTCP (RFC 3711 §3.4)
		dec, err := rx.rtcp.DecryptRTCP(p, p, &f.rtcpHdr)
		if err != nil {
			in.unprotect(err)
			return nil, nil, dst, false
		}
		p = dec
	}
	if !in.rtcpLatch.accept(src, c.gen, c.signalledRTCP, f.policy, f.latchN, &in.peerRTCP) {
		in.refused.Add(1)
		return nil, nil, dst, false
	}
	peer, pr := f.out.peerRTCP.Load(), f.out.pair.Load()
	if peer == nil || !peer.IsValid() || pr == nil || !f.rtcpValid(p) {
		in.dropped.Add(1)
		return nil, nil, dst, false
	}
	if m := in.ssrc.Load(); m != nil && (m.in != m.out || m.tsOff != 0) {
		f.followRewrite(p, m)
	}
	if tx := f.out.tx.Load(); tx != nil {
		enc, err := tx.rtcp.EncryptRTCP(p, p, &f.rtcpHdr)
		if err != nil {
			in.dropped.Add(1)
			return nil, nil, dst, false
		}
		p = enc
	}
	in.rtcp.Add(1)
	return p, pr, *peer, true
}
