package selection

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"
)

// Table holds the known media resources. It is safe for concurrent use.
// Entries are kept as their MSRs declared them; the policy (coefficient,
// placement, the document's inactive MSRs) and the administrative flag are
// applied when they are read, so a new policy or flag holds at once and
// taking it back restores what the MSR declared.
type Table struct {
	now func() time.Time

	mu       sync.Mutex
	entries  map[Key]Entry
	pol      Policy
	inactive map[string]bool // MSR name → administratively inactive (SetActive)
}

// NewTable returns an empty Table governed by pol. now is its clock (nil =
// time.Now).
func NewTable(pol Policy, now func() time.Time) *Table {
	if now == nil {
		now = time.Now
	}
	return &Table{now: now, entries: map[Key]Entry{}, pol: pol, inactive: map[string]bool{}}
}

// SetPolicy replaces the policy.
func (t *Table) SetPolicy(pol Policy) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pol = pol
}

// view is e as selection sees it: with its coefficient and placement from
// the policy, and active unless the policy or SetActive says otherwise.
func (t *Table) view(e Entry) Entry {
	e = t.pol.place(e)
	e.Coefficient = t.pol.Coefficient(e.MSR)
	e.Active = t.activeLocked(e.MSR)
	return e
}

func (t *Table) activeLocked(msr string) bool { return !t.inactive[msr] && !t.pol.Inactive[msr] }

// Upsert inserts or replaces e (by MSR and interface). An entry whose
// Expires is set and not after now removes the resource instead (an
// unREGISTER); Upsert then reports false.
func (t *Table) Upsert(e Entry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !e.Expires.IsZero() && !e.Expires.After(t.now()) {
		delete(t.entries, e.Key())
		return false
	}
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
}

// Active reports whether an MSR may be chosen: neither made inactive
// (SetActive) nor listed inactive by the policy, whether or not it has
// resources in the table.
func (t *Table) Active(msr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.activeLocked(msr)
}

// AdminInactive returns the MSRs SetActive made inactive, sorted.
func (t *Table) AdminInactive() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.inactive))
}

// AdminActive reports the administrative flag alone (SetActive).
func (t *Table) AdminActive(msr string) bool {
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
		out = append(out, t.view(e))
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
		if !t.activeLocked(extra[i].MSR) {
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
