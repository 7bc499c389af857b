package appliance

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/gateway/registrar"
	"github.com/outpost/outpost/media/msr"
	"github.com/outpost/outpost/media/relay"
	"github.com/outpost/outpost/media/selection"
	"github.com/outpost/outpost/netcfg"
)

// msrPart is the box's part in distributed media (docs/design.md §1): the agent
// that registers each interface at the HQ softswitch as an MSR UA, and the
// media resource table that other media servers' MSR REGISTERs fill (the
// registrar authenticates them and hands them over; see OnMSR).
type msrPart struct {
	agent  *msr.Agent
	table  *selection.Table
	unsub  func()
	prefix atomic.Value // string: the header prefix of the active document
	// capacity is msr.capacity_pps in force: the relay packet rate the
	// announced load counts as 100 % (msr.NewLoad reads it per REGISTER).
	capacity atomic.Int64
	log      *slog.Logger
	net      func() netcfg.State
	// remoteState: anchoring calls on other MSRs (remotemedia.go).
	remoteState
}

// newMSRPart builds the agent on the netcfg watcher's events (a fresh
// subscription replays the whole state first, so the agent starts from an
// empty one) and connects the registrar's MSR REGISTERs to the table. The
// announced load is the larger of the CPU and the relay's packet rate
// against msr.capacity_pps; packets counts the relay's RTP packets
// (relay.Stats.TotalPackets). inactive are the MSRs the operator took out
// of selection before (the database's record).
func newMSRPart(next *partConfigs, inactive []string, w *netcfg.Watcher, net func() netcfg.State, reg *registrar.Registrar, media msr.Media, packets func() uint64, log *slog.Logger) (*msrPart, error) {
	p := &msrPart{table: selection.NewTable(next.Selection, time.Now), log: log, net: net, remoteState: newRemoteState()}
	for _, name := range inactive {
		p.table.SetActive(name, false)
	}
	p.prefix.Store(next.MSR.HeaderPrefix)
	p.capacity.Store(int64(next.MSRCapacityPPS))
	load := msr.NewLoad(packets, func() int { return int(p.capacity.Load()) })
	ch, unsub := w.Subscribe(64)
	agent, err := msr.New(next.MSR, ch, netcfg.State{}, log, msr.WithMedia(media), msr.WithLoad(load))
	if err != nil {
		unsub()
		return nil, err
	}
	p.agent, p.unsub = agent, unsub
	reg.OnMSR(p.register)
	return p, nil
}

// register is the registrar's hook: an authenticated MSR REGISTER.
func (p *msrPart) register(m registrar.MSRRegistration) {
	e, err := selection.ParseRegister(p.prefix.Load().(string), m.Headers, m.Contact, m.Expires, time.Now())
	if err != nil {
		p.log.Warn("msr: media resource REGISTER not usable", "contact", m.Contact, "err", err)
		return
	}
	if p.table.Upsert(e) {
		p.log.Info("msr: media resource", "msr", e.MSR, "interface", e.Interface, "addr", e.Addr, "expires_s", m.Expires)
	}
}

// run runs the agent and expires the table until ctx ends.
func (p *msrPart) run(ctx context.Context) error {
	defer p.unsub()
	defer p.pool.Close() // after the gateway: no call is anchored any more
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.table.Expire()
			}
		}
	}()
	err := p.agent.Run(ctx)
	<-done
	return err
}

func (*msrPart) name() string { return "msr" }

// prepare checks the agent's configuration and that the service interface
// it registers from exists. The agent binds its sockets when it applies a
// configuration, on its own goroutine: if that fails there (an address
// taken since prepare), it keeps its previous configuration and says so in
// the log and in outpostctl interfaces, while the document is committed.
func (p *msrPart) prepare(ctx context.Context, next *partConfigs) (change, error) {
	cfg := next.MSR
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Enabled {
		if _, ok := p.net().Link(cfg.ServiceInterface); !ok {
			return nil, fmt.Errorf("service interface %q does not exist", cfg.ServiceInterface)
		}
	}
	policy, capacity := next.Selection, next.MSRCapacityPPS
	return funcs{commit: func() {
		p.capacity.Store(int64(capacity))
		if err := p.agent.Reconfigure(context.WithoutCancel(ctx), cfg); err != nil {
			p.log.Error("msr: applying the configuration failed; the previous one is kept", "err", err)
		}
		p.table.SetPolicy(policy)
		p.prefix.Store(cfg.HeaderPrefix)
	}}, nil
}

// msrStatus is the MSR part of GET /api/v1/interfaces.
func (a *App) msrStatus() ([]api.MSRUA, *api.ControlChannel) {
	var uas []api.MSRUA
	for _, u := range a.msr.agent.Status() {
		ua := api.MSRUA{Interface: u.Interface, URI: u.URI, Server: u.Server, Registered: u.Registered,
			LastCode: u.LastStatus, LastError: u.LastError, Next: u.NextRefresh.UTC()}
		if u.Address.IsValid() {
			ua.Addr = u.Address.String()
		}
		uas = append(uas, ua)
	}
	c := a.msr.agent.Control()
	if !c.Listen.IsValid() && c.Error == "" {
		return uas, nil
	}
	cc := &api.ControlChannel{Error: c.Error, Accepted: c.Accepted, Refused: c.Refused, Dropped: c.Dropped}
	if c.Listen.IsValid() {
		cc.Listen = c.Listen.String()
	}
	for _, ch := range c.Channels {
		cc.Peers = append(cc.Peers, api.ControlPeer{Remote: ch.Remote.String(), Since: ch.Since.UTC(), Synced: ch.Synced,
			KeepAliveS: int(ch.KeepAlive / time.Second), LastRecv: ch.LastRecv.UTC(), Requests: ch.Requests})
	}
	return uas, cc
}

// MediaResources is GET /api/v1/media-resources: the table of media
// resources (this box's interfaces and the MSRs registered here) and the
// selection policy.
func (a *App) MediaResources(context.Context) api.MediaResources {
	parts := a.running().parts
	out := api.MediaResources{Resources: []api.MediaResource{}, Matrix: parts.Selection.Matrix, Performance: parts.Selection.Performance,
		Zone: parts.Local.Zone, Site: parts.Local.Site, AdminInactive: a.msr.table.AdminInactive(),
		DocumentInactive: slices.Sorted(maps.Keys(parts.Selection.Inactive))}
	add := func(e selection.Entry, local bool) {
		r := api.MediaResource{MSR: e.MSR, AccID: e.AccID, Interface: e.Interface, Contact: e.Contact, Zone: e.Zone, Site: e.Site,
			Load: e.Load, Coefficient: e.Coefficient, Registered: e.Registered, Active: e.Active, Expires: e.Expires.UTC(), Local: local}
		if e.Addr.IsValid() {
			r.Addr = e.Addr.String()
		}
		out.Resources = append(out.Resources, r)
	}
	for _, e := range a.msr.agent.Resources() {
		e.Active = a.msr.table.Active(e.MSR)
		add(e, true)
	}
	for _, e := range a.msr.table.Snapshot() {
		add(e, false)
	}
	return out
}

// SetMediaResourceActive is POST /api/v1/media-resources/{name}: the
// administrative flag of every resource of an MSR (this box's own name or
// one registered here), for selection (media/selection.Table.SetActive:
// an inactive resource is never chosen). The flag is written to the
// database before it takes effect, so it outlives a restart; it is the
// box's own, beside the document's media_resources.inactive (either keeps
// the MSR out, and setting it active here does not override HQ's list).
func (a *App) SetMediaResourceActive(ctx context.Context, name string, active bool) (api.MediaResourceState, error) {
	n := 0
	for _, e := range append(a.msr.agent.Resources(), a.msr.table.Snapshot()...) {
		if e.MSR == name {
			n++
		}
	}
	// The box's own name is known even with no interface announced yet.
	if n == 0 && name != a.running().parts.MSR.Name {
		return api.MediaResourceState{}, fmt.Errorf("media resource %q: %w", name, api.ErrNotFound)
	}
	if err := a.st.SetMSRInactive(ctx, name, !active, time.Now()); err != nil {
		return api.MediaResourceState{}, fmt.Errorf("media resource %q: %w", name, err)
	}
	a.msr.table.SetActive(name, active)
	a.msr.log.Info("msr: media resource set administratively", "msr", name, "active", active)
	return api.MediaResourceState{MSR: name, Active: a.msr.table.Active(name), Resources: n, Persistent: true,
		InactiveByDocument: a.running().parts.Selection.Inactive[name]}, nil
}

// msrMedia gives the MSR agent its media connections on the relay's port
// range and codecs (media.codecs): one relay.Endpoint per connection.
type msrMedia struct{ r *relay.Relay }

func (m msrMedia) Open(id string, local netip.Addr, offer []byte, onInactive func(string)) ([]byte, msr.MediaConn, error) {
	e, answer, err := m.r.OpenEndpoint(relay.EndpointConfig{ID: id, Local: local, OnInactive: onInactive}, offer)
	if err != nil {
		return nil, nil, err
	}
	return answer, msrConn{e}, nil
}

// msrConn adapts a relay.Endpoint to msr.MediaConn.
type msrConn struct{ e *relay.Endpoint }

func (c msrConn) Update(offer []byte) ([]byte, error) { return c.e.Update(offer) }

func (c msrConn) ForwardTo(to msr.MediaConn) {
	if t, ok := to.(msrConn); ok {
		c.e.ForwardTo(t.e)
		return
	}
	c.e.ForwardTo(nil)
}

func (c msrConn) Counts() (uint64, uint64) {
	st := c.e.Stats()
	return st.Received, st.Forwarded
}

func (c msrConn) Close() { c.e.Close() }
