package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/outpost/outpost/gateway/b2bua"
)

// MessageStore keeps the instant messages of local users with no phone
// registered (store-and-forward), across restarts: the appliance's
// SQLite store. A Persister given to New that is also a MessageStore
// turns store-and-forward on.
type MessageStore interface {
	// KeepMessage stores m (setting its ID), or refuses it when the
	// addressee's or the box's bound is reached.
	KeepMessage(ctx context.Context, m *b2bua.OfflineMessage) error
	PendingMessages(ctx context.Context, addressee string) ([]b2bua.OfflineMessage, error)
	AllPendingMessages(ctx context.Context) ([]b2bua.OfflineMessage, error)
	DeleteMessage(ctx context.Context, id int64) error
	PruneMessages(ctx context.Context, cutoff time.Time) (int64, error)
}

// MessageMaxAge is how long a kept message waits for its addressee.
const MessageMaxAge = 7 * 24 * time.Hour

// offline is store-and-forward: the B2BUA keeps a message for a user with
// no phone registered (keep), and when a phone of that user registers
// (the registrar's bound hook) the kept messages are sent to it, oldest
// first, and forgotten once a phone took them. pending mirrors who has
// messages, so the registrar's hot path asks a map, not the database.
type offline struct {
	store MessageStore // nil = off
	log   *slog.Logger
	b2b   *b2bua.B2BUA

	mu      sync.Mutex
	pending map[string]bool
	wake    chan string // addressees whose phone registered
}

func newOffline(store MessageStore, log *slog.Logger) *offline {
	return &offline{store: store, log: log, pending: map[string]bool{}, wake: make(chan string, 256)}
}

// keepFunc is the B2BUA's Config.Offline; nil when store-and-forward is
// off.
func (o *offline) keepFunc() func(b2bua.OfflineMessage) error {
	if o == nil || o.store == nil {
		return nil
	}
	return func(m b2bua.OfflineMessage) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := o.store.KeepMessage(ctx, &m); err != nil {
			return err
		}
		o.mu.Lock()
		o.pending[m.Addressee] = true
		o.mu.Unlock()
		return nil
	}
}

// bound is the registrar's hook: a phone of aor registered.
func (o *offline) bound(aor string) {
	o.mu.Lock()
	has := o.pending[aor]
	o.mu.Unlock()
	if !has {
		return
	}
	select {
	case o.wake <- aor:
	default: // a burst of registrations: the next refresh tries again
	}
}

// run delivers on wake-ups and prunes old messages until ctx ends.
func (o *offline) run(ctx context.Context) {
	if o.store == nil {
		return
	}
	if all, err := o.store.AllPendingMessages(ctx); err != nil {
		o.log.Warn("offline messages: read at start", "err", err)
	} else {
		o.mu.Lock()
		for _, m := range all {
			o.pending[m.Addressee] = true
		}
		o.mu.Unlock()
	}
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	o.prune(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case aor := <-o.wake:
			o.deliver(ctx, aor)
		case <-prune.C:
			o.prune(ctx)
		}
	}
}

// deliver sends aor's kept messages, oldest first, stopping at the first
// one no phone takes (they stay for the next registration).
func (o *offline) deliver(ctx context.Context, aor string) {
	ms, err := o.store.PendingMessages(ctx, aor)
	if err != nil {
		o.log.Warn("offline messages: read", "addressee", aor, "err", err)
		return
	}
	for _, m := range ms {
		if time.Since(m.Received) > MessageMaxAge {
			_ = o.store.DeleteMessage(ctx, m.ID)
			continue
		}
		if code := o.b2b.DeliverKept(ctx, m); code/100 != 2 {
			return
		}
		if err := o.store.DeleteMessage(ctx, m.ID); err != nil {
			o.log.Warn("offline messages: forget a delivered one", "addressee", aor, "err", err)
			return
		}
	}
	if rest, err := o.store.PendingMessages(ctx, aor); err == nil && len(rest) == 0 {
		o.mu.Lock()
		delete(o.pending, aor) // none kept meanwhile
		o.mu.Unlock()
	}
}

func (o *offline) prune(ctx context.Context) {
	if n, err := o.store.PruneMessages(ctx, time.Now().Add(-MessageMaxAge)); err != nil {
		o.log.Warn("offline messages: prune", "err", err)
	} else if n > 0 {
		o.log.Info("offline messages older than the limit dropped", "messages", n)
	}
}
