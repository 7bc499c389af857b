package registrar

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/siptarget"
)

// Binding is one registered contact of an address-of-record (the extension).
type Binding struct {
	AOR        string
	ContactURI string // comparison key, RFC 3261 §19.1.4 (see contactKey)
	Contact    string // the Contact value to hand back and route to, without expires
	Source     string // "udp:198.18.0.10:5060": where the REGISTER came from (NAT)
	Local      string // "udp:127.0.0.1:5060": the listener it arrived on
	CallID     string
	CSeq       uint32
	Q          float64 // -1 when the contact carried no q
	Expires    time.Time
	Registered time.Time
	UserAgent  string
	Instance   string // +sip.instance (RFC 5626), informative
	RegID      int
	// Outbound: the binding is bound to its flow (RFC 5626 §6: registered
	// over TCP or TLS with Supported: outbound, reg-id and +sip.instance):
	// requests to it go over that connection only, and when it is gone
	// the caller gets 430 rather than a new connection. Not persisted: a
	// restart drops every connection, and the phone registers again.
	Outbound bool

	// saved is the Expires of this binding as last handed to the
	// persister (refresh.go): a refresh that changes nothing else is
	// written only when that has fallen too far behind.
	saved time.Time
}

// SourceTarget is Source read by siptarget's grammar: the transport and
// address requests to this binding go to. ok is false when Source does
// not parse (a row restored from a store that predates the grammar).
func (b Binding) SourceTarget() (siptarget.Target, bool) { return specTarget(b.Source) }

// LocalTarget is Local read the same way: the listener it arrived on.
func (b Binding) LocalTarget() (siptarget.Target, bool) { return specTarget(b.Local) }

func specTarget(s string) (siptarget.Target, bool) {
	t, err := siptarget.Parse(s, "")
	return t, err == nil && t.IsIP()
}

// BindingKey identifies a binding.
type BindingKey struct{ AOR, ContactURI string }

func (b *Binding) key() BindingKey { return BindingKey{b.AOR, b.ContactURI} }

// table holds every binding in memory. Writers also record which keys
// changed so the persister can write them behind in one transaction.
type table struct {
	mu    sync.Mutex
	aors  map[string][]*Binding
	dirty map[BindingKey]*Binding // nil value = deleted
	// touched are the AORs changed since takeTouched, for the presence
	// hook (upstream registration follows whether an AOR has a binding).
	touched map[string]struct{}
}

func newTable() *table {
	return &table{aors: map[string][]*Binding{}, dirty: map[BindingKey]*Binding{}, touched: map[string]struct{}{}}
}

// takeTouched returns the AORs changed since the last call, split by
// whether they have a binding now.
func (t *table) takeTouched() (present, absent []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for aor := range t.touched {
		if len(t.aors[aor]) > 0 {
			present = append(present, aor)
		} else {
			absent = append(absent, aor)
		}
	}
	clear(t.touched)
	slices.Sort(present)
	slices.Sort(absent)
	return present, absent
}

// lookup returns copies of the unexpired bindings of aor.
func (t *table) lookup(aor string, now time.Time) []Binding {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.liveLocked(aor, now)
}

func (t *table) liveLocked(aor string, now time.Time) []Binding {
	var out []Binding
	for _, b := range t.aors[aor] {
		if b.Expires.After(now) {
			out = append(out, *b)
		}
	}
	return out
}

// all returns copies of every unexpired binding, ordered by AOR then contact.
func (t *table) all(now time.Time) []Binding {
	t.mu.Lock()
	out := make([]Binding, 0, len(t.aors))
	for _, bs := range t.aors {
		for _, b := range bs {
			if b.Expires.After(now) {
				out = append(out, *b)
			}
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Binding) int {
		if c := strings.Compare(a.AOR, b.AOR); c != 0 {
			return c
		}
		return strings.Compare(a.ContactURI, b.ContactURI)
	})
	return out
}

// load installs bindings read back from the persister without marking them dirty.
func (t *table) load(bs []Binding, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range bs {
		if bs[i].Expires.After(now) {
			b := bs[i]
			b.saved = b.Expires
			t.aors[b.AOR] = append(t.aors[b.AOR], &b)
		}
	}
}

// markLocked records that the binding k changed to b (nil = deleted). The
// persister gets b itself: a binding is never changed once it is in the
// table (an update replaces it), so there is nothing to copy.
func (t *table) markLocked(k BindingKey, b *Binding) {
	t.touched[k.AOR] = struct{}{}
	t.dirty[k] = b
}

// expire removes bindings whose time has passed and returns how many went
// and the AORs that lost one.
func (t *table) expire(now time.Time) (int, []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	var lost []string
	for aor, bs := range t.aors {
		kept := bs[:0]
		for _, b := range bs {
			if b.Expires.After(now) {
				kept = append(kept, b)
				continue
			}
			t.markLocked(b.key(), nil)
			n++
		}
		if len(kept) < len(bs) {
			lost = append(lost, aor)
		}
		if len(kept) == 0 {
			delete(t.aors, aor)
		} else {
			clear(bs[len(kept):])
			t.aors[aor] = kept
		}
	}
	return n, lost
}

// dropAOR removes every binding of aor (used when a user is deleted).
func (t *table) dropAOR(aor string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	bs := t.aors[aor]
	for _, b := range bs {
		t.markLocked(b.key(), nil)
	}
	delete(t.aors, aor)
	return len(bs)
}

// takeDirty hands the pending changes to the persister.
func (t *table) takeDirty() (upserts []Binding, deletes []BindingKey) {
	t.mu.Lock()
	d := t.dirty
	if len(d) == 0 {
		t.mu.Unlock()
		return nil, nil
	}
	t.dirty = make(map[BindingKey]*Binding, len(d))
	t.mu.Unlock()
	for k, b := range d {
		if b == nil {
			deletes = append(deletes, k)
		} else {
			upserts = append(upserts, *b)
		}
	}
	return upserts, deletes
}

// requeue puts changes that failed to persist back, unless newer ones exist.
func (t *table) requeue(upserts []Binding, deletes []BindingKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range upserts {
		k := upserts[i].key()
		if _, newer := t.dirty[k]; !newer {
			t.dirty[k] = &upserts[i]
		}
	}
	for _, k := range deletes {
		if _, newer := t.dirty[k]; !newer {
			t.dirty[k] = nil
		}
	}
}

// contactKey is the comparison form of a contact URI (RFC 3261 §19.1.4):
// scheme and host are case-insensitive, user is not, an absent port differs
// from an explicit one, and the transport/user/maddr/ttl/method parameters
// take part in the comparison while other parameters do not.
func contactKey(u *sip.Uri) string {
	var sb strings.Builder
	sb.Grow(len(u.User) + len(u.Host) + 24)
	sb.WriteString(strings.ToLower(u.Scheme))
	sb.WriteByte(':')
	if u.User != "" {
		sb.WriteString(u.User)
		sb.WriteByte('@')
	}
	sb.WriteString(strings.ToLower(u.Host))
	if u.Port != 0 {
		sb.WriteByte(':')
		sb.WriteString(strconv.Itoa(u.Port))
	}
	for _, p := range [...]string{"transport", "user", "maddr", "ttl", "method"} {
		if v, ok := u.UriParams.Get(p); ok {
			sb.WriteByte(';')
			sb.WriteString(p)
			sb.WriteByte('=')
			sb.WriteString(strings.ToLower(v))
		}
	}
	return sb.String()
}
