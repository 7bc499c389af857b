package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/media/relay"
)

// mediaPart anchors calls' media on the RTP relay (media.relay): the
// B2BUA asks it for an Anchor per call, the CDR gets each call's per-leg
// statistics when it ends, and outpostctl calls shows them live.
type mediaPart struct {
	r      *relay.Relay
	log    *slog.Logger
	policy atomic.Pointer[anchorPolicy]
	ports  func() []int // ports the box's other parts have bound (SIP, management, MSR control)
	// ifaceOf names the interface holding a local address ("" = none
	// known); nil = no interface is known (media.srtp_interfaces unused).
	ifaceOf func(netip.Addr) string
	mu      sync.Mutex
	live    map[string]*relay.Session // by call ID, while the call lasts
	done    map[string]endedMedia
}

// anchorPolicy says which calls are anchored. With Always (media.relay),
// every call: the box is always in the media path (NAT, VLAN separation,
// transcoding, statistics). Without it, only calls whose two legs face
// different local addresses (different interfaces/VLANs, or a PSTN gateway
// on its own segment); the phones of one VLAN then talk directly.
//
// SRTP policy of a leg, most specific first: for leg B (the leg the call
// is routed to) the route's entry in SRTPRoutes (media.srtp_routes, by
// dial-plan route, e.g. "hq" for the HQ trunk); for either leg the entry
// in SRTPInterfaces (media.srtp_interfaces) of the interface its media
// faces, the one holding the box's address on that leg (ifaceOf); else
// SRTP (media.srtp). So route > interface > global: a route names a peer
// (HQ requires SRTP wherever it is reached), an interface a network
// segment. The relay applies it per leg (relay.SessionConfig.SRTP); the
// route reaches the anchor through SetRoute, which the B2BUA calls before
// the first offer. Keys are never logged (relay, sdprewrite).
type anchorPolicy struct {
	Always         bool
	SRTP           relay.SRTPPolicy            `json:",omitempty"`
	SRTPRoutes     map[string]relay.SRTPPolicy `json:",omitempty"`
	SRTPInterfaces map[string]relay.SRTPPolicy `json:",omitempty"`
}

// forLeg is the policy of a leg whose media faces interface ifname ("" =
// not known) before any route override.
func (p *anchorPolicy) forLeg(ifname string) relay.SRTPPolicy {
	if pol, ok := p.SRTPInterfaces[ifname]; ok && ifname != "" {
		return pol
	}
	return p.SRTP
}

func newMediaPart(next *partConfigs, ports func() []int, log *slog.Logger) (*mediaPart, error) {
	r, err := relay.New(next.Relay, log)
	if err != nil {
		return nil, err
	}
	m := &mediaPart{r: r, log: log, ports: ports, live: map[string]*relay.Session{}, done: map[string]endedMedia{}}
	m.policy.Store(&next.Anchor)
	return m, nil
}

func (*mediaPart) name() string { return "media" }

// prepare checks the relay's configuration, and that its port range holds
// none of the ports the box's listeners are bound to: a relay port there
// would never bind, or would take a port a listener needs next.
func (m *mediaPart) prepare(_ context.Context, next *partConfigs) (change, error) {
	cfg, err := next.Relay.Check()
	if err != nil {
		return nil, err
	}
	for _, p := range m.ports() {
		if p >= cfg.PortMin && p <= cfg.PortMax {
			return nil, fmt.Errorf("port range %d-%d holds port %d, which a listener of the box is bound to", cfg.PortMin, cfg.PortMax, p)
		}
	}
	policy := next.Anchor
	return funcs{commit: func() {
		if err := m.r.Reconfigure(cfg); err != nil {
			m.log.Error("media relay refused a checked configuration", "err", err)
		}
		m.policy.Store(&policy)
	}}, nil
}

// anchor is the B2BUA's MediaFunc.
func (m *mediaPart) anchor(callID string, legA, legB netip.Addr, onDead func(reason string)) (b2bua.Anchor, error) {
	if !m.anchors(legA, legB) {
		return nil, nil // one segment: direct media
	}
	pol := m.policy.Load()
	return m.session(callID, legA, legB, onDead, pol, pol.forLeg(m.iface(legB)))
}

// boxAnchor anchors a call whose leg B is the box itself (its
// voicemail): always, with leg B plain RTP on the address facing A.
func (m *mediaPart) boxAnchor(callID string, legA netip.Addr, onDead func(reason string)) (b2bua.Anchor, error) {
	return m.session(callID, legA, legA, onDead, m.policy.Load(), relay.SRTPOff)
}

func (m *mediaPart) session(callID string, legA, legB netip.Addr, onDead func(reason string), pol *anchorPolicy, srtpB relay.SRTPPolicy) (b2bua.Anchor, error) {
	s, err := m.r.NewSession(relay.SessionConfig{ID: callID, LocalA: legA, LocalB: legB, OnInactive: onDead,
		SRTP: [2]relay.SRTPPolicy{pol.forLeg(m.iface(legA)), srtpB}})
	if err != nil {
		return nil, fmt.Errorf("media relay: %w", err)
	}
	m.mu.Lock()
	m.live[callID] = s
	m.mu.Unlock()
	return &anchor{m: m, id: callID, s: s, routes: pol.SRTPRoutes}, nil
}

// anchors reports whether the policy anchors a call whose legs face
// local addresses legA and legB.
func (m *mediaPart) anchors(legA, legB netip.Addr) bool {
	return m.policy.Load().Always || legA != legB
}

// iface names the interface holding local address ip ("" = unknown).
func (m *mediaPart) iface(ip netip.Addr) string {
	if m.ifaceOf == nil {
		return ""
	}
	return m.ifaceOf(ip)
}

// anchor adapts a relay session to b2bua.Anchor.
type anchor struct {
	m      *mediaPart
	id     string
	s      *relay.Session
	routes map[string]relay.SRTPPolicy // the policy's media.srtp_routes when the call was anchored
}

// SetRoute is called by the B2BUA with the call's dial-plan route before
// the first offer: leg B, the one the call is routed to, takes the route's
// SRTP policy from media.srtp_routes.
func (a *anchor) SetRoute(route string) {
	if p, ok := a.routes[route]; ok {
		if err := a.s.SetSRTP(relay.B, p); err != nil {
			a.m.log.Warn("media relay: SRTP policy of route", "call", a.id, "route", route, "err", err)
		}
	}
}

func (a *anchor) Offer(from b2bua.Leg, sdp []byte) ([]byte, error) {
	return a.s.Offer(relay.Leg(from), sdp)
}

func (a *anchor) Answer(from b2bua.Leg, sdp []byte) ([]byte, error) {
	return a.s.Answer(relay.Leg(from), sdp)
}

// Reject: a refused re-offer. The relay applies an offer when it rewrites
// it; until it can roll one back, the next offer or answer sets the state.
func (a *anchor) Reject(b2bua.Leg) {}

func (a *anchor) HoldFor(l b2bua.Leg, on bool) { a.s.HoldFor(relay.Leg(l), on) }

// BoxLeg turns leg B toward the box's voicemail: plain RTP, whatever
// the route's policy was.
func (a *anchor) BoxLeg() {
	if err := a.s.SetSRTP(relay.B, relay.SRTPOff); err != nil {
		a.m.log.Warn("media relay: leg B toward the voicemail", "call", a.id, "err", err)
	}
}

func (a *anchor) Close() {
	st := a.s.Close()
	streams := a.s.Streams()
	a.m.mu.Lock()
	delete(a.m.live, a.id)
	a.m.done[a.id] = endedMedia{audio: st, streams: streams}
	a.m.mu.Unlock()
}

// endedMedia are the figures of an ended call's relayed media, kept for
// its CDR.
type endedMedia struct {
	audio   [2]relay.LegStats
	streams []relay.StreamStats
}

// takeStats returns (and forgets) the statistics of an ended call, as JSON
// for the CDR: the audio per leg ("a", "b") and the other streams
// ("streams", when there were any); "" when its media was not relayed.
func (m *mediaPart) takeStats(callID string) string {
	m.mu.Lock()
	st, ok := m.done[callID]
	delete(m.done, callID)
	m.mu.Unlock()
	if !ok {
		return ""
	}
	b, _ := json.Marshal(struct {
		A       api.MediaLeg      `json:"a"`
		B       api.MediaLeg      `json:"b"`
		Streams []api.MediaStream `json:"streams,omitempty"`
	}{apiLeg(st.audio[relay.A]), apiLeg(st.audio[relay.B]), apiStreams(st.streams)})
	return string(b)
}

// liveStats returns the statistics of a call in progress: the audio per
// leg, and the other streams.
func (m *mediaPart) liveStats(callID string) (*[2]api.MediaLeg, []api.MediaStream) {
	m.mu.Lock()
	s := m.live[callID]
	m.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	st := s.Stats()
	return &[2]api.MediaLeg{apiLeg(st[relay.A]), apiLeg(st[relay.B])}, apiStreams(s.Streams())
}

func apiStreams(list []relay.StreamStats) []api.MediaStream {
	var out []api.MediaStream
	for _, x := range list {
		out = append(out, api.MediaStream{Kind: x.Kind, Legs: [2]api.MediaLeg{apiLeg(x.Legs[relay.A]), apiLeg(x.Legs[relay.B])}})
	}
	return out
}

func apiLeg(s relay.LegStats) api.MediaLeg {
	return api.MediaLeg{Packets: s.Packets, Bytes: s.Bytes, Lost: s.Lost, JitterMs: s.Jitter, Relayed: s.Relayed, Port: s.Port,
		Protection: protection(s.SRTP)}
}

// protection names a leg's media protection from its SDES suite (the
// relay's LegStats.SRTP): the suite's name only, never a key.
func protection(suite string) string {
	if suite == "" {
		return "rtp"
	}
	return "srtp:" + suite
}

func (m *mediaPart) run(ctx context.Context) error { return m.r.Run(ctx) }

// boundPorts are the ports the box's listeners hold now: SIP, the
// management API and the MSR control channel.
func (a *App) boundPorts() []int {
	var out []int
	add := func(hostport string) {
		if ap, err := netip.ParseAddrPort(hostport); err == nil {
			out = append(out, int(ap.Port()))
		}
	}
	for _, l := range a.gw.Listeners() {
		_, hp, _ := strings.Cut(l, ":")
		add(hp)
	}
	if m := a.mgmt.Addr(); m != "" {
		add(m)
	}
	if c := a.msr.agent.Control(); c.Listen.IsValid() {
		out = append(out, int(c.Listen.Port()))
	}
	return out
}

// ifaceOf names the interface that holds local address ip now (the
// netlink state), for media.srtp_interfaces; "" when none does.
func (a *App) ifaceOf(ip netip.Addr) string {
	for _, ad := range a.netState().Addrs {
		if ad.Prefix.Addr() == ip.Unmap() {
			return ad.LinkName
		}
	}
	return ""
}
