package selection

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Table holds the known media resources. It is safe for concurrent use.
type Table struct {
	now func() time.Time

	mu       sync.Mutex
	entries  map[Key]Entry
	pol      Policy
	inactive map[string]bool // MSR name → administratively inactive
}

// NewTable returns an empty Table governed by pol. now is its clock (nil =
// time.Now).
func NewTable(pol Policy, now func() time.Time) *Table {
	if now == nil {
		now = time.Now
	}
	return &Table{now: now, entries: map[Key]Entry{}, pol: pol, inactive: map[string]bool{}}
}

// SetPolicy replaces the policy and re-applies the coefficients.
func (t *Table) SetPolicy(pol Policy) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pol = pol
	for k, e := range t.entries {
		e.Coefficient = pol.Coefficient(e.MSR)
		t.entries[k] = e
	}
}

// Upsert inserts or replaces e (by MSR and interface), setting its
// Coefficient from the policy and its Active flag from SetActive (an MSR
// is active unless made inactive). An entry whose Expires is set and not
// after now removes the resource instead (an unREGISTER); Upsert then
// reports false.
func (t *Table) Upsert(e Entry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !e.Expires.IsZero() && !e.Expires.After(t.now()) {
		delete(t.entries, e.Key())
		return false
	}
	e.Coefficient = t.pol.Coefficient(e.MSR)
	e.Active = !t.inactive[e.MSR]
	t.entries[e.Key()] = e
	return true
}

// Remove deletes a resource; it reports whether it was there.
func (t *Table) Remove(k Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.entries[k]
	delete(t.entries, k)
	return ok
}

// RemoveMSR deletes every resource of an MSR and returns how many.
func (t *Table) RemoveMSR(msr string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k := range t.entries {
		if k.MSR == msr {
			delete(t.entries, k)
			n++
		}
	}
	return n
}

// Expire deletes the registrations that have lapsed and returns them.
func (t *Table) Expire() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var out []Entry
	for k, e := range t.entries {
		if !e.Expires.IsZero() && !e.Expires.After(now) {
			out = append(out, e)
			delete(t.entries, k)
		}
	}
	sortEntries(out)
	return out
}

// SetActive sets the administrative flag of every resource of an MSR,
// present and future.
func (t *Table) SetActive(msr string, active bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if active {
		delete(t.inactive, msr)
	} else {
		t.inactive[msr] = true
	}
	for k, e := range t.entries {
		if k.MSR == msr {
			e.Active = active
			t.entries[k] = e
		}
	}
}

// Active reports the administrative flag of an MSR (SetActive; true
// unless made inactive), whether or not it has resources in the table.
func (t *Table) Active(msr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.inactive[msr]
}

// Snapshot returns a copy of every entry, sorted by MSR then interface.
// Lapsed registrations still present (Expire not yet run) are reported
// with Registered false.
func (t *Table) Snapshot() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	out := make([]Entry, 0, len(t.entries))
	for _, e := range t.entries {
		if !e.Expires.IsZero() && !e.Expires.After(now) {
			e.Registered = false
		}
		out = append(out, e)
	}
	sortEntries(out)
	return out
}

// Select runs Select over the table's entries plus extra (typically the
// box's own interfaces, msr.Agent.Resources), at the table's clock and
// with its policy. An extra entry of an MSR made inactive (SetActive) is
// inactive too.
func (t *Table) Select(req Request, rnd Rand, extra ...Entry) (Entry, error) {
	t.mu.Lock()
	pol := t.pol
	extra = slices.Clone(extra)
	for i := range extra {
		if t.inactive[extra[i].MSR] {
			extra[i].Active = false
		}
	}
	t.mu.Unlock()
	if req.Now.IsZero() {
		req.Now = t.now()
	}
	return Select(append(t.Snapshot(), extra...), req, pol, rnd)
}

func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.MSR, b.MSR), cmp.Compare(a.Interface, b.Interface))
	})
}
