package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/media/relay"
)

// mediaPart anchors calls' media on the RTP relay (media.relay): the
// B2BUA asks it for an Anchor per call, the CDR gets each call's per-leg
// statistics when it ends, and outpostctl calls shows them live.
//
// Where media is anchored: with media.relay true, every call (the box is
// always in the media path: NAT, VLAN separation, transcoding, statistics);
// with it false, only calls whose two legs face different local addresses
// (different interfaces/VLANs, or a PSTN gateway on its own segment), and
// the phones of one VLAN talk directly.
type mediaPart struct {
	r    *relay.Relay
	log  *slog.Logger
	mu   sync.Mutex
	live map[string]*relay.Session // by call ID, while the call lasts
	done map[string][2]relay.LegStats
	// always is media.relay of the active document.
	always bool
}

func relayConfig(d *config.Document) relay.Config {
	return relay.Config{PortMin: d.Media.EffectivePortMin(), PortMax: d.Media.EffectivePortMax(),
		Codecs: d.Media.EffectiveCodecs(), InactivityTimeout: d.Media.EffectiveInactivity()}
}

func newMediaPart(d *config.Document, log *slog.Logger) (*mediaPart, error) {
	r, err := relay.New(relayConfig(d), log)
	if err != nil {
		return nil, err
	}
	return &mediaPart{r: r, log: log, live: map[string]*relay.Session{}, done: map[string][2]relay.LegStats{}, always: d.Media.Relay}, nil
}

func (m *mediaPart) reconfigure(d *config.Document) error {
	if err := m.r.Reconfigure(relayConfig(d)); err != nil {
		return err
	}
	m.mu.Lock()
	m.always = d.Media.Relay
	m.mu.Unlock()
	return nil
}

// anchor is the B2BUA's MediaFunc.
func (m *mediaPart) anchor(callID string, legA, legB netip.Addr, onDead func(reason string)) (b2bua.Anchor, error) {
	m.mu.Lock()
	always := m.always
	m.mu.Unlock()
	if !always && legA == legB {
		return nil, nil // one segment: direct media
	}
	s, err := m.r.NewSession(relay.SessionConfig{ID: callID, LocalA: legA, LocalB: legB, OnInactive: onDead})
	if err != nil {
		return nil, fmt.Errorf("media relay: %w", err)
	}
	m.mu.Lock()
	m.live[callID] = s
	m.mu.Unlock()
	return &anchor{m: m, id: callID, s: s}, nil
}

// anchor adapts a relay session to b2bua.Anchor.
type anchor struct {
	m  *mediaPart
	id string
	s  *relay.Session
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

func (a *anchor) Close() {
	st := a.s.Close()
	a.m.mu.Lock()
	delete(a.m.live, a.id)
	a.m.done[a.id] = st
	a.m.mu.Unlock()
}

// takeStats returns (and forgets) the statistics of an ended call, as JSON
// for the CDR; "" when its media was not relayed.
func (m *mediaPart) takeStats(callID string) string {
	m.mu.Lock()
	st, ok := m.done[callID]
	delete(m.done, callID)
	m.mu.Unlock()
	if !ok {
		return ""
	}
	b, _ := json.Marshal(map[string]api.MediaLeg{"a": apiLeg(st[relay.A]), "b": apiLeg(st[relay.B])})
	return string(b)
}

// liveStats returns the statistics of a call in progress.
func (m *mediaPart) liveStats(callID string) *[2]api.MediaLeg {
	m.mu.Lock()
	s := m.live[callID]
	m.mu.Unlock()
	if s == nil {
		return nil
	}
	st := s.Stats()
	return &[2]api.MediaLeg{apiLeg(st[relay.A]), apiLeg(st[relay.B])}
}

func apiLeg(s relay.LegStats) api.MediaLeg {
	return api.MediaLeg{Packets: s.Packets, Bytes: s.Bytes, Lost: s.Lost, JitterMs: s.Jitter, Relayed: s.Relayed, Port: s.Port}
}

func (m *mediaPart) run(ctx context.Context) error { return m.r.Run(ctx) }
