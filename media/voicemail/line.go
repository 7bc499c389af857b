package voicemail

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"

	"github.com/outpost/outpost/media/g711"
	"github.com/outpost/outpost/media/sdprewrite"
)

// ErrNotAcceptable: the offer has no plain RTP audio stream in G.711.
var ErrNotAcceptable = errors.New("voicemail: offer not acceptable")

// frame is 20 ms at 8 kHz.
const frame = 160

// Line is the box's end of one voicemail call: a G.711 RTP stream it
// plays prompts into and records from, with DTMF by RFC 4733 events on
// the stream or by Digit (SIP INFO).
type Line struct {
	rtp, rtcp *net.UDPConn
	law       g711.Law
	pt        uint8
	tePT      int // -1: no telephone-event
	remote    atomic.Pointer[netip.AddrPort]

	digits  chan byte
	pending byte   // a digit that cut a prompt short, for the next read (playThrough)
	lastTE  uint32 // timestamp of the last event reported (receive goroutine only)
	haveTE  bool
	lastRTP atomic.Int64 // unix nanoseconds of the last audio packet

	mu   sync.Mutex
	sink func([]int16) // the recorder; nil when not recording

	ssrc, ts uint32
	seq      uint16
	marker   bool
	out      []byte
	pcm      []int16

	stats    *counters
	wg       sync.WaitGroup
	closeOne sync.Once
}

// open answers offer from the box's address local: the first of PCMU and
// PCMA the offer lists, telephone-event when offered, on a port pair of
// its own. The offer must be plain RTP: the relay anchors the caller (and
// does any SRTP) before the box answers.
func open(local netip.Addr, offer []byte, stats *counters) (*Line, []byte, error) {
	s, err := sdprewrite.Parse(offer)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotAcceptable, err)
	}
	if sdprewrite.IsSecure(s.Audio.Proto) {
		return nil, nil, fmt.Errorf("%w: %s", ErrNotAcceptable, s.Audio.Proto)
	}
	var codec, te *sdprewrite.Codec
	for i, c := range s.Audio.Codecs {
		switch {
		case codec == nil && (c.Is("PCMU") || c.Is("PCMA")):
			codec = &s.Audio.Codecs[i]
		case te == nil && c.Is("telephone-event") && c.Rate == sampleRate:
			te = &s.Audio.Codecs[i]
		}
	}
	if codec == nil {
		return nil, nil, fmt.Errorf("%w: no G.711 in the offer", ErrNotAcceptable)
	}
	rtpc, rtcpc, err := bindPair(local)
	if err != nil {
		return nil, nil, fmt.Errorf("voicemail: binding media ports on %s: %w", local, err)
	}
	l := &Line{rtp: rtpc, rtcp: rtcpc, law: g711.Ulaw, pt: codec.PT, tePT: -1, digits: make(chan byte, 32), stats: stats,
		out: make([]byte, 0, 12+frame), pcm: make([]int16, 0, 2*frame)}
	if codec.Is("PCMA") {
		l.law = g711.Alaw
	}
	codecs := []sdprewrite.Codec{*codec}
	if te != nil {
		l.tePT = int(te.PT)
		codecs = append(codecs, *te)
	}
	var rnd [10]byte
	_, _ = rand.Read(rnd[:])
	l.ssrc, l.seq, l.ts = binary.BigEndian.Uint32(rnd[0:]), binary.BigEndian.Uint16(rnd[4:]), binary.BigEndian.Uint32(rnd[6:])
	if s.Audio.Port != 0 && !s.Audio.Hold && s.Audio.Addr.IsValid() {
		r := netip.AddrPortFrom(s.Audio.Addr.Unmap(), uint16(s.Audio.Port))
		l.remote.Store(&r)
	}
	port := rtpc.LocalAddr().(*net.UDPAddr).Port
	addrType := "IP4"
	if local.Is6() {
		addrType = "IP6"
	}
	id := strconv.FormatUint(uint64(l.ssrc), 10)
	answer := s.Rewrite(sdprewrite.Params{
		Origin: sdprewrite.Origin{Username: "outpost", SessID: id, Version: 1, NetType: "IN", AddrType: addrType, Address: local.String()},
		Addr:   local, Port: port, Codecs: codecs, Direction: sdprewrite.SendRecv, Proto: "RTP/AVP",
	})
	l.wg.Add(2)
	go l.receive()
	go l.drainRTCP()
	return l, answer, nil
}

// bindPair binds an even port and the next one on addr (RFC 3550 §11:
// RTCP on RTP's port + 1), from the kernel's ephemeral range.
func bindPair(addr netip.Addr) (*net.UDPConn, *net.UDPConn, error) {
	var last error
	for range 32 {
		a, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err != nil {
			return nil, nil, err
		}
		p := a.LocalAddr().(*net.UDPAddr).Port
		if p%2 == 0 && p < 65535 {
			b, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(p+1))))
			if err == nil {
				return a, b, nil
			}
			last = err
		}
		_ = a.Close()
	}
	return nil, nil, fmt.Errorf("no free port pair: %w", last)
}

// Close stops the line and releases its ports.
func (l *Line) Close() {
	l.closeOne.Do(func() {
		_ = l.rtp.Close()
		_ = l.rtcp.Close()
		l.wg.Wait()
	})
}

// Digit delivers a DTMF digit (from the stream, or from SIP INFO).
func (l *Line) Digit(d byte) {
	select {
	case l.digits <- d:
	default:
		l.stats.garbageDTMF.Add(1) // nobody reads: a flood of digits
	}
}

// receive reads the caller's RTP until the line closes.
func (l *Line) receive() {
	defer l.wg.Done()
	buf := make([]byte, 1500)
	var p rtp.Packet
	for {
		n, from, err := l.rtp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		l.handle(buf[:n], from, &p)
	}
}

// handle takes one datagram from the caller's side.
func (l *Line) handle(b []byte, from netip.AddrPort, p *rtp.Packet) {
	if p.Unmarshal(b) != nil {
		l.stats.badPackets.Add(1)
		return
	}
	switch {
	case int(p.PayloadType) == l.tePT:
		l.event(p.Timestamp, p.Payload)
	case p.PayloadType == l.pt:
		// Symmetric RTP (RFC 4961): answer where the caller sends from.
		if f := netip.AddrPortFrom(from.Addr().Unmap(), from.Port()); l.remote.Load() == nil || *l.remote.Load() != f {
			nf := f // allocated only when the source moves
			l.remote.Store(&nf)
		}
		l.lastRTP.Store(time.Now().UnixNano())
		l.mu.Lock()
		if l.sink != nil {
			l.pcm = g711.Decode(l.pcm[:0], p.Payload, l.law)
			l.sink(l.pcm)
		}
		l.mu.Unlock()
	default:
		l.stats.badPackets.Add(1)
	}
}

// drainRTCP reads and drops RTCP, so the port answers nothing.
func (l *Line) drainRTCP() {
	defer l.wg.Done()
	buf := make([]byte, 1500)
	for {
		if _, _, err := l.rtcp.ReadFromUDPAddrPort(buf); err != nil {
			return
		}
	}
}

// event reads an RFC 4733 telephone-event payload: one digit per event,
// reported at its first packet (each event keeps its RTP timestamp over
// its packets and their retransmitted end).
func (l *Line) event(ts uint32, payload []byte) {
	if len(payload) < 4 {
		l.stats.garbageDTMF.Add(1)
		return
	}
	if l.haveTE && ts == l.lastTE {
		return
	}
	l.haveTE, l.lastTE = true, ts
	const keys = "0123456789*#ABCD"
	if e := payload[0]; int(e) < len(keys) {
		l.Digit(keys[e])
		return
	}
	l.stats.garbageDTMF.Add(1) // a tone the box has no key for (flash, fax tones)
}

// record sends the caller's audio to sink until stopped (nil).
func (l *Line) record(sink func([]int16)) {
	l.mu.Lock()
	l.sink = sink
	l.mu.Unlock()
}

// lastAudio is when the caller's last audio packet came (zero: never).
func (l *Line) lastAudio() time.Time {
	if n := l.lastRTP.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// play sends ulaw (µ-law samples, 8 kHz) paced at 20 ms a frame. It
// returns early with the digit when one of stopOn arrives (other digits
// are dropped), or with ctx's error.
func (l *Line) play(ctx context.Context, ulaw []byte, stopOn string) (byte, error) {
	return l.frames(ctx, (len(ulaw)+frame-1)/frame, func(i int) []byte { return ulaw[i*frame : min((i+1)*frame, len(ulaw))] }, stopOn)
}

// silence keeps the stream going for d (a pause, a wait for digits),
// returning early like play.
func (l *Line) silence(ctx context.Context, d time.Duration, stopOn string) (byte, error) {
	return l.frames(ctx, int(d/(20*time.Millisecond)), func(int) []byte { return quietFrame[:] }, stopOn)
}

// quietFrame is 20 ms of µ-law silence.
var quietFrame = func() (f [frame]byte) {
	for i := range f {
		f[i] = 0xFF
	}
	return f
}()

// frames sends n frames from next, one every 20 ms.
func (l *Line) frames(ctx context.Context, n int, next func(i int) []byte, stopOn string) (byte, error) {
	if d := l.pending; d != 0 {
		l.pending = 0
		if strings.IndexByte(stopOn, d) >= 0 {
			return d, nil
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	l.marker = true
	for i := range n {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case d := <-l.digits:
			if strings.IndexByte(stopOn, d) >= 0 {
				return d, nil
			}
		case <-tick.C:
		}
		l.send(next(i))
	}
	return 0, nil
}

// playThrough plays a prompt that any key cuts short; the key is kept
// for the next read (type-ahead past a confirmation).
func (l *Line) playThrough(ctx context.Context, ulaw []byte) error {
	d, err := l.play(ctx, ulaw, "0123456789*#ABCD")
	l.pending = d
	return err
}

// waitDigit waits up to d for a digit, keeping the stream going.
func (l *Line) waitDigit(ctx context.Context, d time.Duration, accept string) (byte, error) {
	return l.silence(ctx, d, accept)
}

// send sends one frame of µ-law samples in the line's law.
func (l *Line) send(ulaw []byte) {
	r := l.remote.Load()
	if r == nil {
		return
	}
	h := rtp.Header{Version: 2, Marker: l.marker, PayloadType: l.pt, SequenceNumber: l.seq, Timestamp: l.ts, SSRC: l.ssrc}
	l.marker = false
	l.seq++
	l.ts += frame
	out, err := h.MarshalTo(l.out[:cap(l.out)])
	if err != nil {
		return
	}
	pkt := append(l.out[:out], ulaw...)
	if l.law == g711.Alaw {
		g711.UlawToAlawInPlace(pkt[out:])
	}
	_, _ = l.rtp.WriteToUDPAddrPort(pkt, *r)
}
