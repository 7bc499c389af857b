package appliance

import (
	"cmp"
	"context"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/media/mscclient"
	"github.com/outpost/outpost/media/selection"
)

// anchorMedia is the B2BUA's MediaFunc. When the box anchors a call
// (mediaPart's policy) it chooses where, as docs/design.md §1 says: among
// its own media resources and those other boxes' MSRs registered here
// (media/selection, chooseMedia), for each leg from that leg's zone and
// site (the user's or trunk's, else the box's). Its own wins → the local
// relay; another box's MSR wins → the B2BUA sets the media up there
// (b2bua.RemoteAnchor: an INVITE per leg to that MSR's UA and a join on
// its control channel), falling back to the local relay when that fails.
// When the legs' choices differ, each leg is anchored on its own and the
// two are bridged (b2bua.ChainAnchor).
func (a *App) anchorMedia(br b2bua.Bridge, onDead func(reason string)) (b2bua.Anchor, error) {
	if br.Box {
		return a.media.boxAnchor(br.CallID, br.A, onDead)
	}
	local := func() (b2bua.Anchor, error) { return a.media.anchor(br.CallID, br.A, br.B, onDead) }
	if a.msr == nil || !a.media.anchors(br.A, br.B) {
		return local()
	}
	parts := a.running().parts
	own := a.msr.agent.Resources()
	legs := [2]selection.Request{parts.Places.request(br.EndA, parts.Local), parts.Places.request(br.EndB, parts.Local)}
	a.msr.mu.Lock()
	ch := chooseMedia(own, a.msr.table.Snapshot(), parts.Local, legs, parts.Selection, a.msr.table.Active, a.msr.rnd, time.Now())
	a.msr.mu.Unlock()
	on := func(c mediaChoice) b2bua.Anchor {
		m := b2bua.RemoteMSR{Name: c.Entry.MSR, URI: c.Entry.Contact, Control: poolControl{a.msr.pool, c.Control}}
		return a.gw.RemoteAnchor(br.CallID, m, local, func(err error) { a.msr.noteFallback(c.Entry.MSR, err) }, onDead)
	}
	switch {
	case ch[0].Remote && ch[1].Remote && ch[0].Entry.MSR == ch[1].Entry.MSR:
		return on(ch[0]), nil
	case !ch[0].Remote && !ch[1].Remote:
		return local()
	}
	hop := func(c mediaChoice) (b2bua.Anchor, error) {
		if c.Remote {
			return on(c), nil
		}
		return local()
	}
	near, err := hop(ch[0])
	if err != nil {
		return nil, err
	}
	far, err := hop(ch[1])
	if err != nil {
		near.Close()
		return nil, err
	}
	return b2bua.ChainAnchor(near, far), nil
}

// request is the selection request of a leg whose far end is e: its
// user's or trunk's zone and site, else the box's.
func (p mediaPlaces) request(e b2bua.End, local localResources) selection.Request {
	var pl place
	switch e.Route {
	case dialplan.RouteLocal:
		pl = p.Users[e.Name]
	case dialplan.RouteHQ:
		pl = p.HQ
	case dialplan.RoutePSTN:
		pl = p.PSTN[e.Name]
	}
	return selection.Request{Zone: cmp.Or(pl.Zone, local.Zone), Site: cmp.Or(pl.Site, local.Site)}
}

// mediaChoice is where one leg's media is anchored: another box's MSR
// (Remote, its entry and control-channel address) or the box itself.
type mediaChoice struct {
	Remote  bool
	Entry   selection.Entry
	Control netip.AddrPort
}

// chooseMedia decides where each leg of a call is anchored. own are the
// box's own resources (msr.Agent.Resources; one stands for the box when
// it announces none), remote the table of resources other MSRs
// registered here, legs the two legs' requests (zone and site). Each leg
// gets its nearest resource (its zone and site, the site matrix, weighted
// by load × coefficient), the caller's leg first; the called leg takes
// the caller leg's MSR when that is among its nearest (docs/design.md §1),
// so a call whose legs are near the same MSR stays on it.
//
// Decision: a farther MSR is not shared to save a hop. When the legs'
// nearest differ, each is anchored on its own and the two are bridged:
// each leg's media then crosses no more distance than its own nearest.
//
// Decisions: a remote MSR is a candidate only when one of its entries
// carries the control channel (the service UA's CC-Addr/CC-Port) and
// its Contact is known: without them the media cannot be set up there.
// Nothing qualifying for a leg (everything inactive, forbidden or in
// other zones) leaves that leg on the local relay: selection never
// refuses a call.
func chooseMedia(own, remote []selection.Entry, local localResources, legs [2]selection.Request, pol selection.Policy,
	active func(string) bool, rnd selection.Rand, now time.Time) [2]mediaChoice {
	if len(own) == 0 {
		own = []selection.Entry{{MSR: local.MSR, Interface: "relay", Zone: local.Zone, Site: local.Site, Registered: true}}
	}
	var cands []selection.Entry
	for _, e := range own {
		e.MSR, e.Active = local.MSR, active(local.MSR)
		cands = append(cands, e)
	}
	control := map[string]netip.AddrPort{}
	for _, e := range remote {
		if e.Control.IsValid() {
			control[e.MSR] = e.Control
		}
	}
	for _, e := range remote {
		if e.MSR == local.MSR || e.Contact == "" || !control[e.MSR].IsValid() {
			continue
		}
		e.Active = e.Active && active(e.MSR)
		cands = append(cands, e)
	}
	var out [2]mediaChoice
	prefer := ""
	for i, req := range legs {
		req.Now = now
		e, err := preferred(cands, req, pol, prefer)
		if err != nil {
			e, err = selection.Select(cands, req, pol, rnd)
		}
		if err != nil || e.MSR == local.MSR {
			prefer = local.MSR
			continue
		}
		out[i] = mediaChoice{Remote: true, Entry: e, Control: control[e.MSR]}
		prefer = e.MSR
	}
	return out
}

// preferred is the caller leg's MSR, msr, when it is among the nearest
// for req; else selection.ErrNoResource.
func preferred(cands []selection.Entry, req selection.Request, pol selection.Policy, msr string) (selection.Entry, error) {
	if msr != "" {
		for _, c := range selection.Candidates(cands, req, pol) {
			if c.MSR == msr {
				return c, nil
			}
		}
	}
	return selection.Entry{}, selection.ErrNoResource
}

// poolControl joins on the MSR's channel from the pool, dialled (and
// synchronised) on first use.
type poolControl struct {
	p    *mscclient.Pool
	addr netip.AddrPort
}

func (c poolControl) Join(ctx context.Context, id1, id2 string) error {
	conn, err := c.p.Get(ctx, c.addr)
	if err != nil {
		return err
	}
	return conn.Join(ctx, id1, id2)
}

// remoteState is msrPart's side of remote anchoring: the control channels
// and the random source of the choice, and the rate limit of the
// fallback log.
type remoteState struct {
	pool *mscclient.Pool
	mu   sync.Mutex // guards rnd
	rnd  *rand.Rand

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
}

// fallbackLogEvery bounds the "remote MSR failed" warnings: a dead MSR
// would otherwise log once per call.
const fallbackLogEvery = time.Minute

func newRemoteState() remoteState {
	return remoteState{pool: mscclient.NewPool(mscclient.Config{}), rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6d7372))}
}

// noteFallback logs a call that fell back to the local relay, at most
// once per fallbackLogEvery (with the number of those not logged).
func (p *msrPart) noteFallback(msrName string, err error) {
	p.logMu.Lock()
	now := time.Now()
	if !p.lastLog.IsZero() && now.Sub(p.lastLog) < fallbackLogEvery {
		p.suppressed++
		p.logMu.Unlock()
		return
	}
	n := p.suppressed
	p.lastLog, p.suppressed = now, 0
	p.logMu.Unlock()
	p.log.Warn("msr: media on another MSR failed; the call uses the local relay", "msr", msrName, "err", err, "not_logged_since", n)
}
