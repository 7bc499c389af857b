package appliance

import (
	"context"
	"slices"
	"time"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/store"
	"github.com/outpost/outpost/gateway"
	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/registrar"
	"github.com/outpost/outpost/netcfg"
)

// gatewayPart applies a document to the SIP side (listeners, registrar,
// B2BUA, HQ trunk, upstream registration): gateway.Server's own
// Prepare/Commit/Abort, with the appliance's hooks (CDRs, media anchoring)
// wired into each configuration.
type gatewayPart struct{ a *App }

func (gatewayPart) name() string { return "gateway" }

func (p gatewayPart) prepare(ctx context.Context, next *partConfigs) (change, error) {
	c, err := p.a.gw.Prepare(ctx, p.a.wire(next))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// wire adds the appliance's hooks to a translated gateway configuration.
func (a *App) wire(next *partConfigs) gateway.Config {
	cfg := next.Gateway
	cfg.Calls.Services = a.services.under(next.Services)
	cfg.Calls.OnEnd = a.recordCDR
	cfg.Calls.Media = a.anchorMedia
	cfg.Calls.Voicemail = mailboxes{svc: a.vm}
	if cfg.TLS.CertPEM == "" {
		cfg.TLS = a.boxTLS
	}
	return cfg
}

// mailboxChanged lights or puts out the mailbox user's lamps.
func (a *App) mailboxChanged(mailbox string) {
	if gw := a.gw; gw != nil {
		gw.MailboxChanged(mailbox)
	}
}

// env is the environment a document is translated in now.
func (a *App) env() environment {
	return environment{Build: a.opts.Version, Mode: a.mode.Mode(), Net: a.netState(), Hostname: a.host}
}

// netState is the newest network state: the watcher's once it has one,
// the snapshot taken at start before.
func (a *App) netState() netcfg.State {
	if st := a.net.State(); len(st.Links) > 0 {
		return st
	}
	return a.net0
}

// firstSnapshot reads the network state once, before the gateway binds
// its first listeners (the watcher has no state until it runs).
func (a *App) firstSnapshot(ctx context.Context) netcfg.State {
	st, err := a.netSrc.Snapshot(ctx)
	if err != nil {
		a.log.Warn("reading network interfaces failed; interface listen specs bind nothing until netlink answers", "err", err)
	}
	return st
}

// addressesChanged reports whether a netcfg batch may change what listen
// specs naming interfaces bind.
func addressesChanged(batch []netcfg.Event) bool {
	for _, ev := range batch {
		switch ev.Kind {
		case netcfg.AddrAdded, netcfg.AddrRemoved, netcfg.LinkAdded, netcfg.LinkRemoved, netcfg.LinkChanged:
			return true
		}
	}
	return false
}

// followAddresses re-applies the listen specs that name interfaces when
// addresses come and go (a DHCP or PPPoE renewal): new addresses are bound,
// vanished ones closed, the others kept (the gateway never rebinds an
// unchanged listener, so calls on them go on). It runs on its own
// goroutine, woken by the netlink handler through a channel of capacity
// one, because it takes the apply lock: a netlink event never waits for a
// push.
func (a *App) followAddresses(ctx context.Context, wake <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		a.rebindListeners(ctx)
	}
}

func (a *App) rebindListeners(ctx context.Context) {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	if a.stopping {
		return
	}
	doc := a.running().doc
	ls, err := doc.SIP.Listeners()
	if err != nil || !slices.ContainsFunc(ls, func(l config.Listen) bool { return l.Interface != "" }) {
		return
	}
	next, err := translate(doc, a.env())
	if err != nil {
		return
	}
	before := a.gw.Listeners()
	if err := a.gw.Reconfigure(ctx, a.wire(next)); err != nil {
		a.log.Error("following interface addresses: rebinding SIP listeners failed", "err", err)
		return
	}
	if after := a.gw.Listeners(); !slices.Equal(before, after) {
		a.log.Info("SIP listeners follow the interfaces' addresses", "sip", after, "was", before)
	}
}

// bindingStore persists the registrar's bindings in the store.
type bindingStore struct{ st *store.Store }

func (b bindingStore) LoadBindings(ctx context.Context, now time.Time) ([]registrar.Binding, error) {
	rows, err := b.st.LoadBindings(ctx, now)
	if err != nil {
		return nil, err
	}
	out := make([]registrar.Binding, len(rows))
	for i, r := range rows {
		out[i] = registrar.Binding{AOR: r.AOR, ContactURI: r.ContactURI, Contact: r.Contact, Source: r.Source, Local: r.Local,
			CallID: r.CallID, CSeq: r.CSeq, Q: r.Q, Expires: r.Expires, Registered: r.Registered, UserAgent: r.UserAgent,
			Instance: r.Instance, RegID: r.RegID} // Outbound is not kept: the flow died with the restart
	}
	return out, nil
}

func (b bindingStore) SaveBindings(ctx context.Context, ups []registrar.Binding, dels []registrar.BindingKey) error {
	rows := make([]store.Binding, len(ups))
	for i, u := range ups {
		rows[i] = store.Binding{AOR: u.AOR, ContactURI: u.ContactURI, Contact: u.Contact, Source: u.Source, Local: u.Local,
			CallID: u.CallID, CSeq: u.CSeq, Q: u.Q, Expires: u.Expires, Registered: u.Registered, UserAgent: u.UserAgent,
			Instance: u.Instance, RegID: u.RegID}
	}
	keys := make([]store.BindingKey, len(dels))
	for i, d := range dels {
		keys[i] = store.BindingKey(d)
	}
	return b.st.SaveBindings(ctx, rows, keys)
}

// The gateway's store-and-forward of instant messages, in the same
// database: at most offlinePerUser messages per addressee and
// offlineTotal on the box.
const (
	offlinePerUser = 100
	offlineTotal   = 2000
)

func (b bindingStore) KeepMessage(ctx context.Context, m *b2bua.OfflineMessage) error {
	row := store.OfflineMessage{Addressee: m.Addressee, Sender: m.Sender, Display: m.Display, ContentType: m.ContentType, Body: m.Body, Received: m.Received}
	if err := b.st.KeepMessage(ctx, &row, offlinePerUser, offlineTotal); err != nil {
		return err
	}
	m.ID = row.ID
	return nil
}

func (b bindingStore) PendingMessages(ctx context.Context, addressee string) ([]b2bua.OfflineMessage, error) {
	return offlineMessages(b.st.PendingMessages(ctx, addressee))
}

func (b bindingStore) AllPendingMessages(ctx context.Context) ([]b2bua.OfflineMessage, error) {
	return offlineMessages(b.st.AllPendingMessages(ctx))
}

func (b bindingStore) DeleteMessage(ctx context.Context, id int64) error {
	return b.st.DeleteMessage(ctx, id)
}

func (b bindingStore) PruneMessages(ctx context.Context, cutoff time.Time) (int64, error) {
	return b.st.PruneMessages(ctx, cutoff)
}

func offlineMessages(rows []store.OfflineMessage, err error) ([]b2bua.OfflineMessage, error) {
	if err != nil {
		return nil, err
	}
	out := make([]b2bua.OfflineMessage, len(rows))
	for i, r := range rows {
		out[i] = b2bua.OfflineMessage{ID: r.ID, Addressee: r.Addressee, Sender: r.Sender, Display: r.Display, ContentType: r.ContentType, Body: r.Body, Received: r.Received}
	}
	return out, nil
}

var _ gateway.MessageStore = bindingStore{}
