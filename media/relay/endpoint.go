package relay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/media/g711"
	"github.com/outpost/outpost/media/sdprewrite"
	"github.com/pion/rtp"
)

// Endpoint terminates one RTP stream on the box: a media server's
// connection (media/msr), as opposed to a Session, which relays a call
// between two legs. The box answers the remote side's offer itself; what
// the endpoint receives goes nowhere until ForwardTo names another
// endpoint, whose remote side then receives it from that endpoint's own
// ports (possibly on another interface), transcoded between µ-law and
// A-law when the two endpoints negotiated different laws.
//
// Decisions: one codec per endpoint (the first allowed one the offer
// lists, as the answer says), telephone-event passed with its payload type
// mapped; latching as the relay's Config says (LatchSignalled: only the
// signalled address; LatchFirstPackets: the first source after each SDP);
// no SSRC rewriting (one source per endpoint); plain RTP only (an
// RTP/SAVP offer is ErrNotAcceptable); RTCP is passed on unchanged.
type Endpoint struct {
	r          *Relay
	id         string
	local      netip.Addr
	pair       *pair
	codecs     []string
	policy     Latching
	timeout    time.Duration
	onInactive func(string)
	wg         sync.WaitGroup

	conf atomic.Pointer[epConf]
	out  atomic.Pointer[Endpoint] // where received media goes; nil = nowhere

	rtpIn, rtcpIn, forwarded, dropped, refused atomic.Uint64

	mu       sync.Mutex
	closed   bool
	sent     sentSDP
	gen      uint64
	inactive struct {
		fired bool
		last  uint64
		seen  time.Time
	}
	closeOnce sync.Once
}

// epConf is what the forwarding path reads about an endpoint: immutable,
// replaced as a whole by each offer.
type epConf struct {
	gen        uint64
	remote     netip.AddrPort // where the remote side receives RTP (invalid on hold)
	remoteRTCP netip.AddrPort
	codec      sdprewrite.Codec // the negotiated codec, payload type as answered
	te         sdprewrite.Codec // telephone-event, Name "" when none
	sends      bool             // the remote side may send to the box
	receives   bool             // the remote side accepts media from the box
}

// EndpointStats are an endpoint's counters.
type EndpointStats struct {
	Port      int    // the box's RTP port (RTCP = Port+1)
	Codec     string // negotiated codec
	Received  uint64 // RTP packets accepted from the remote side
	Forwarded uint64 // of those, sent on to the endpoint ForwardTo named
	Dropped   uint64 // accepted, not forwarded (no target, direction, unknown payload type)
	Refused   uint64 // refused by the latching policy
	RTCP      uint64 // RTCP packets received
}

// EndpointConfig describes a new endpoint.
type EndpointConfig struct {
	ID    string     // names the endpoint in logs
	Local netip.Addr // the box's address: the ports are bound there
	// OnInactive is called once, on a goroutine of the relay, when the
	// remote side, which its SDP says sends, has sent no RTP for
	// Config.InactivityTimeout (0 = never).
	OnInactive func(reason string)
}

// OpenEndpoint binds an RTP/RTCP pair on ec.Local and answers offer: the
// allowed codecs (Config.Codecs) intersected with the offered ones, the
// first audio codec and telephone-event if both sides have it, and the
// reverse of the offer's direction. ErrNotAcceptable (488) when nothing
// matches or the offer is not plain RTP audio; no port stays bound then.
func (r *Relay) OpenEndpoint(ec EndpointConfig, offer []byte) (*Endpoint, []byte, error) {
	if !ec.Local.IsValid() || ec.Local.IsUnspecified() {
		return nil, nil, r.errorf("endpoint %s: local address %v: need a specific address", ec.ID, ec.Local)
	}
	cfg := r.Config()
	e := &Endpoint{r: r, id: ec.ID, local: ec.Local.Unmap(), codecs: cfg.Codecs, policy: cfg.Latching,
		timeout: cfg.InactivityTimeout, onInactive: ec.OnInactive}
	e.sent.sessID = strconv.FormatUint(randUint63(), 10)
	e.sent.version = 1
	p, conf, err := e.negotiate(offer)
	if err != nil {
		return nil, nil, err
	}
	pr, err := r.ports.allocate(e.local, false)
	if err != nil {
		return nil, nil, fmt.Errorf("media/relay: endpoint %s: %w", ec.ID, err)
	}
	e.pair = pr
	if err := r.addEndpoint(e); err != nil {
		r.ports.release(pr)
		return nil, nil, err
	}
	e.mu.Lock()
	answer := e.answer(p, conf)
	e.mu.Unlock()
	e.conf.Store(conf)
	e.wg.Add(2)
	go e.readRTP()
	go e.readRTCP()
	return e, answer, nil
}

// ID returns the endpoint's ID.
func (e *Endpoint) ID() string { return e.id }

// Port returns the box's RTP port of the endpoint.
func (e *Endpoint) Port() int { return e.pair.port }

// Update takes a new offer from the remote side (re-INVITE) and returns
// the answer; on error the previous negotiation stays.
func (e *Endpoint) Update(offer []byte) ([]byte, error) {
	p, conf, err := e.negotiate(offer)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("media/relay: endpoint %s: %w", e.id, ErrClosed)
	}
	if old := e.conf.Load(); old != nil && old.remote == conf.remote {
		conf.gen = old.gen
	}
	answer := e.answer(p, conf)
	e.conf.Store(conf)
	e.inactive.seen, e.inactive.last = time.Time{}, e.rtpIn.Load()
	return answer, nil
}

// negotiate reads an offer and settles the endpoint's side of it.
func (e *Endpoint) negotiate(offer []byte) (*sdprewrite.SDP, *epConf, error) {
	p, err := parseAudio(offer)
	if err != nil {
		return nil, nil, fmt.Errorf("media/relay: endpoint %s: %w: %w", e.id, ErrNotAcceptable, err)
	}
	if sdprewrite.IsSecure(p.Audio.Proto) {
		return nil, nil, fmt.Errorf("media/relay: endpoint %s: %w: %s not supported on a media server connection", e.id, ErrNotAcceptable, p.Audio.Proto)
	}
	c := &epConf{}
	for _, x := range sdprewrite.Intersect(p.Audio.Codecs, e.codecs) {
		switch {
		case isTE(x):
			if c.te.Name == "" {
				c.te = x
			}
		case c.codec.Name == "":
			c.codec = x
		}
	}
	if c.codec.Name == "" {
		return nil, nil, fmt.Errorf("media/relay: endpoint %s: %w: no allowed audio codec in %v (allowed %v)", e.id, ErrNotAcceptable, names(p.Audio.Codecs), e.codecs)
	}
	sig := signalled(p.Audio)
	c.remote, c.remoteRTCP = sig.rtp, sig.rtcp
	dir := effectiveDir(p.Audio)
	c.sends, c.receives = dir.Sends(), dir.Receives() && c.remote.IsValid()
	e.mu.Lock()
	e.gen++
	c.gen = e.gen
	e.mu.Unlock()
	return p, c, nil
}

// answer writes the answer to p. Called with e.mu held.
func (e *Endpoint) answer(p *sdprewrite.SDP, c *epConf) []byte {
	codecs := []sdprewrite.Codec{c.codec}
	if c.te.Name != "" {
		codecs = append(codecs, c.te)
	}
	st := &e.sent
	params := sdprewrite.Params{
		Origin:    sdprewrite.Origin{Username: "outpost", SessID: st.sessID, Version: st.version},
		Addr:      e.local,
		Port:      e.pair.port,
		Codecs:    codecs,
		Direction: effectiveDir(p.Audio).Reverse(),
		Proto:     "RTP/AVP",
	}
	out := p.Rewrite(params)
	body := withoutOrigin(out)
	if st.last != nil && string(body) != string(st.last) {
		st.version++
		params.Origin.Version = st.version
		out = p.Rewrite(params)
	}
	st.last = body
	return out
}

// ForwardTo sends what the endpoint receives from now on to to's remote
// side (from to's ports), or nowhere when to is nil. Joining two endpoints
// both ways is a.ForwardTo(b) and b.ForwardTo(a).
func (e *Endpoint) ForwardTo(to *Endpoint) {
	e.out.Store(to)
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() EndpointStats {
	st := EndpointStats{Port: e.pair.port, Received: e.rtpIn.Load(), Forwarded: e.forwarded.Load(),
		Dropped: e.dropped.Load(), Refused: e.refused.Load(), RTCP: e.rtcpIn.Load()}
	if c := e.conf.Load(); c != nil {
		st.Codec = c.codec.Name
	}
	return st
}

// Close stops the endpoint, waits for its readers and releases its ports.
// Endpoints that forward to it stop sending (their packets are dropped).
// Safe to call more than once.
func (e *Endpoint) Close() EndpointStats {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		e.out.Store(nil)
		_ = e.pair.rtp.Close()
		_ = e.pair.rtcp.Close()
		e.wg.Wait()
		e.r.ports.release(e.pair)
		e.r.removeEndpoint(e)
	})
	return e.Stats()
}

// accept applies the latching policy (owned by one reader). An endpoint
// sends to the signalled address, so the learned one is not published
// (publishing it through a local would allocate once per packet).
func (e *Endpoint) accept(lt *latch, src, signalled netip.AddrPort, gen uint64) bool {
	return lt.accept(src, gen, signalled, e.policy, 1, nil)
}

func (e *Endpoint) readRTP() {
	defer e.wg.Done()
	var lt latch
	var pkt rtp.Packet // reused: parsing allocates nothing per packet
	buf := make([]byte, maxPacket)
	for {
		n, src, err := e.pair.rtp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		to, dst, ok := e.forwardRTP(&pkt, &lt, buf[:n], src)
		if !ok {
			continue
		}
		if _, err := to.pair.rtp.WriteToUDPAddrPort(buf[:n], dst); err != nil {
			e.dropped.Add(1)
			continue
		}
		e.forwarded.Add(1)
	}
}

// forwardRTP handles one RTP packet p from src, parsed into the reader's
// pkt: latching, then the payload type mapped and the payload transcoded
// in place for the endpoint it goes to. It returns that endpoint and the
// address to send p to, or ok false when the packet is not forwarded.
func (e *Endpoint) forwardRTP(pkt *rtp.Packet, lt *latch, p []byte, src netip.AddrPort) (to *Endpoint, dst netip.AddrPort, ok bool) {
	c := e.conf.Load()
	if !e.accept(lt, src, c.remote, c.gen) {
		e.refused.Add(1)
		return nil, dst, false
	}
	if !parseRTP(pkt, p) {
		e.dropped.Add(1)
		return nil, dst, false
	}
	e.rtpIn.Add(1)
	to = e.out.Load()
	if to == nil || !c.sends {
		e.dropped.Add(1)
		return nil, dst, false
	}
	oc := to.conf.Load()
	if oc == nil || !oc.receives {
		e.dropped.Add(1)
		return nil, dst, false
	}
	h := &pkt.Header
	in := h.PayloadType
	switch {
	case h.PayloadType == c.codec.PT:
		if !c.codec.Is(oc.codec.Name) {
			switch {
			case c.codec.Is("PCMU") && oc.codec.Is("PCMA"):
				g711.UlawToAlawInPlace(pkt.Payload)
			case c.codec.Is("PCMA") && oc.codec.Is("PCMU"):
				g711.AlawToUlawInPlace(pkt.Payload)
			default:
				e.dropped.Add(1)
				return nil, dst, false
			}
		}
		h.PayloadType = oc.codec.PT & 0x7F
	case c.te.Name != "" && h.PayloadType == c.te.PT && oc.te.Name != "":
		h.PayloadType = oc.te.PT & 0x7F
	default:
		e.dropped.Add(1)
		return nil, dst, false
	}
	if h.PayloadType != in {
		writeRTPHeader(p, h)
	}
	return to, oc.remote, true
}

func (e *Endpoint) readRTCP() {
	defer e.wg.Done()
	var lt latch
	buf := make([]byte, maxPacket)
	for {
		n, src, err := e.pair.rtcp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		c := e.conf.Load()
		if !e.accept(&lt, src, c.remoteRTCP, c.gen) {
			e.refused.Add(1)
			continue
		}
		e.rtcpIn.Add(1)
		to := e.out.Load()
		if to == nil {
			continue
		}
		if oc := to.conf.Load(); oc != nil && oc.remoteRTCP.IsValid() {
			_, _ = to.pair.rtcp.WriteToUDPAddrPort(buf[:n], oc.remoteRTCP)
		}
	}
}

// checkInactive reports a reason once when the remote side, which says
// it sends, has sent no RTP for the timeout.
func (e *Endpoint) checkInactive(now time.Time) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := &e.inactive
	c := e.conf.Load()
	if e.timeout <= 0 || e.closed || in.fired || c == nil {
		return "", false
	}
	n := e.rtpIn.Load()
	if !c.sends || in.seen.IsZero() || n != in.last {
		in.last, in.seen = n, now
		return "", false
	}
	if now.Sub(in.seen) >= e.timeout {
		in.fired = true
		return fmt.Sprintf("no RTP for %v", e.timeout), true
	}
	return "", false
}

func (r *Relay) addEndpoint(e *Endpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.endpoints == nil {
		r.endpoints = map[*Endpoint]struct{}{}
	}
	r.endpoints[e] = struct{}{}
	return nil
}

// removeEndpoint forgets e and keeps its packet count in r.done (under
// the same lock, so Stats never sees the count drop). e's readers have
// stopped: the count is final.
func (r *Relay) removeEndpoint(e *Endpoint) {
	r.mu.Lock()
	if _, ok := r.endpoints[e]; ok {
		delete(r.endpoints, e)
		r.done.EndpointPackets += e.rtpIn.Load()
	}
	r.mu.Unlock()
}

// Endpoints returns the number of open endpoints.
func (r *Relay) Endpoints() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.endpoints)
}

func (r *Relay) endpointList() []*Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := make([]*Endpoint, 0, len(r.endpoints))
	for e := range r.endpoints {
		list = append(list, e)
	}
	return list
}

func (r *Relay) scanEndpoints(now time.Time) {
	for _, e := range r.endpointList() {
		if reason, ok := e.checkInactive(now); ok {
			r.log.Info("media/relay: endpoint inactive", "endpoint", e.id, "reason", reason)
			if cb := e.onInactive; cb != nil {
				r.wg.Go(func() { cb(reason) })
			}
		}
	}
}
