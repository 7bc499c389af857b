package appliance

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/media/mscclient"
	"github.com/outpost/outpost/media/selection"
)

// anchorMedia is the B2BUA's MediaFunc. When the box anchors a call
// (mediaPart's policy) it chooses where, as docs/design.md §1 says: among its own
// media resources and those other boxes' MSRs registered here
// (media/selection, chooseMedia). Its own wins → the local relay, as
// before; another box's MSR wins → the B2BUA sets the media up there
// (b2bua.RemoteAnchor: an INVITE per leg to that MSR's UA and a join on
// its control channel), falling back to the local relay when that fails.
func (a *App) anchorMedia(callID string, legA, legB netip.Addr, onDead func(reason string)) (b2bua.Anchor, error) {
	local := func() (b2bua.Anchor, error) { return a.media.anchor(callID, legA, legB, onDead) }
	if a.msr == nil || !a.media.anchors(legA, legB) {
		return local()
	}
	parts := a.running().parts
	own := a.msr.agent.Resources()
	a.msr.mu.Lock()
	e, ctl, ok := chooseMedia(own, a.msr.table.Snapshot(), parts.Local, parts.Selection, a.msr.table.Active, a.msr.rnd, time.Now())
	a.msr.mu.Unlock()
	if !ok {
		return local()
	}
	m := b2bua.RemoteMSR{Name: e.MSR, URI: e.Contact, Control: poolControl{a.msr.pool, ctl}}
	return a.gw.RemoteAnchor(callID, m, local, func(err error) { a.msr.noteFallback(e.MSR, err) }, onDead), nil
}

// chooseMedia decides where a call's media is anchored. own are the box's
// own resources (msr.Agent.Resources; one stands for the box when it
// announces none), remote the table of resources other MSRs registered
// here. The caller's leg is chosen first (zone and site of this box, the
// site matrix, weighted by load × coefficient); the called leg then
// prefers the caller leg's MSR (docs/design.md §1), which with both legs in the
// box's own zone and site it always gets. ok is true when another box's
// MSR won, with its entry and its control-channel address.
//
// Decisions: a remote MSR is a candidate only when one of its entries
// carries the control channel (the service UA's CC-Addr/CC-Port) and
// its Contact is known: without them the media cannot be set up there.
// Both legs are anchored on one MSR (no cross-MSR joins); should the
// called leg's choice ever differ, the local relay anchors the call.
// Nothing qualifying (everything inactive, forbidden or in other zones)
// leaves the call on the local relay: selection never refuses a call.
func chooseMedia(own, remote []selection.Entry, local localResources, pol selection.Policy, active func(string) bool,
	rnd selection.Rand, now time.Time) (selection.Entry, netip.AddrPort, bool) {
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
	req := selection.Request{Zone: local.Zone, Site: local.Site, Now: now}
	ea, err := selection.Select(cands, req, pol, rnd)
	if err != nil || ea.MSR == local.MSR {
		return selection.Entry{}, netip.AddrPort{}, false
	}
	req.PreferMSR = ea.MSR
	eb, err := selection.Select(cands, req, pol, rnd)
	if err != nil || eb.MSR != ea.MSR {
		return selection.Entry{}, netip.AddrPort{}, false
	}
	return ea, control[ea.MSR], true
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
