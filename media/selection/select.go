package selection

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"time"
)

// ErrNoResource: no entry survived the filters.
var ErrNoResource = errors.New("media/selection: no media resource available")

// Policy is the media_resources section of the config document.
type Policy struct {
	// Matrix is site → site → distance. A missing cell forbids the pair,
	// but a site's distance to itself is 0 when its cell is missing; 0
	// is a distance like any other. A nil or empty Matrix forbids and
	// ranks nothing.
	Matrix map[string]map[string]int
	// Performance is MSR name → coefficient; missing or ≤ 0 = 1.
	Performance map[string]float64
	// Inactive are MSRs the document takes out of selection (beside those
	// Table.SetActive does).
	Inactive map[string]bool
	// Placement is MSR name → the zone and site assigned to it, in place
	// of those it declares (an empty field keeps the declared one).
	Placement map[string]Placement
}

// Placement is an MSR's assigned zone and site.
type Placement struct{ Zone, Site string }

// place applies the policy's placement of e's MSR to e.
func (p Policy) place(e Entry) Entry {
	if pl, ok := p.Placement[e.MSR]; ok {
		e.Zone = cmp.Or(pl.Zone, e.Zone)
		e.Site = cmp.Or(pl.Site, e.Site)
	}
	return e
}

// Coefficient returns the performance coefficient of an MSR (default 1).
func (p Policy) Coefficient(msr string) float64 {
	if c, ok := p.Performance[msr]; ok && c > 0 {
		return c
	}
	return 1
}

// distance returns the distance from → to, ok false when forbidden.
func (p Policy) distance(from, to string) (int, bool) {
	if len(p.Matrix) == 0 {
		return 0, true
	}
	d, ok := p.Matrix[from][to]
	if !ok && from == to {
		return 0, true // a site's own distance, when the matrix omits it
	}
	return d, ok
}

// Request describes the leg that needs a media resource.
type Request struct {
	Zone string // the leg's media zone
	Site string // the leg's media site (matrix row)
	// MSRID is the MSR the other leg already uses ("" = none): narrow to
	// it when it is a candidate.
	MSRID string
	// PreferMSR is the calling leg's MSR, when selecting for the called
	// leg: taken when its zone and site allow it.
	PreferMSR string
	// Now decides expiry; zero = time.Now().
	Now time.Time
}

// Rand is the random source of Select; *math/rand/v2.Rand satisfies it.
// Float64 returns a value in [0, 1).
type Rand interface{ Float64() float64 }

// Interval is the share of one candidate in the weighted draw: the draw
// r ∈ [0, total) picks the candidate with Lo ≤ r < Hi.
type Interval struct {
	Entry  Entry
	Lo, Hi float64
}

// milli is the fixed-point scale of coefficients in weights.
const milli = 1000

// weight is (100 − load) × coefficient in thousandths.
func weight(e Entry) int64 {
	c := e.Coefficient
	if c <= 0 {
		c = 1
	}
	return int64(100-clampLoad(e.Load)) * int64(math.Round(c*milli))
}

// Intervals lays the candidates out in the given order on [0, total),
// each with a length equal to its weight (100 − load) × coefficient.
func Intervals(cands []Entry) []Interval {
	out := make([]Interval, 0, len(cands))
	var acc int64
	for _, e := range cands {
		w := weight(e)
		out = append(out, Interval{Entry: e, Lo: float64(acc) / milli, Hi: float64(acc+w) / milli})
		acc += w
	}
	return out
}

// Select picks the media resource for a leg from entries, following the
// steps in the package documentation. Coefficients come from the entries
// (Table fills them), or from pol.Performance for an entry with none;
// pol supplies the distance matrix. rnd must not be nil.
func Select(entries []Entry, req Request, pol Policy, rnd Rand) (Entry, error) {
	cands := Candidates(entries, req, pol)
	if len(cands) == 0 {
		return Entry{}, ErrNoResource
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	return draw(cands, rnd), nil
}

// Candidates returns what Select draws from, in draw order (steps 1–4 of
// the package documentation, or the single preferred entry).
func Candidates(entries []Entry, req Request, pol Policy) []Entry {
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	// 1. Registered, active, unexpired, in the leg's zone. An entry
	// without a coefficient (a local resource) takes the policy's.
	var c []Entry
	for _, e := range entries {
		if e.Registered && e.Active && (e.Expires.IsZero() || e.Expires.After(now)) && e.Zone == req.Zone {
			if e.Coefficient <= 0 {
				e.Coefficient = pol.Coefficient(e.MSR)
			}
			c = append(c, e)
		}
	}
	// Forbidden sites go whatever else happens.
	type ranked struct {
		e Entry
		d int
	}
	var r []ranked
	for _, e := range c {
		if d, ok := pol.distance(req.Site, e.Site); ok {
			r = append(r, ranked{e, d})
		}
	}
	// Keep the order independent of the caller's.
	slices.SortFunc(r, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.e.MSR, b.e.MSR), cmp.Compare(a.e.Interface, b.e.Interface))
	})
	// The calling leg's MSR, when its zone and site allow it.
	if req.PreferMSR != "" {
		for _, x := range r {
			if x.e.MSR == req.PreferMSR {
				return []Entry{x.e}
			}
		}
	}
	// 2. Narrow to the other leg's MSR when it is a candidate.
	if req.MSRID != "" && slices.ContainsFunc(r, func(x ranked) bool { return x.e.MSR == req.MSRID }) {
		r = slices.DeleteFunc(r, func(x ranked) bool { return x.e.MSR != req.MSRID })
	}
	// 3. Keep the nearest.
	if len(r) == 0 {
		return nil
	}
	best := slices.MinFunc(r, func(a, b ranked) int { return cmp.Compare(a.d, b.d) }).d
	// 4. One entry per MSR: sorted by (MSR, Interface), the first wins.
	var out []Entry
	for _, x := range r {
		if x.d != best {
			continue
		}
		if n := len(out); n > 0 && out[n-1].MSR == x.e.MSR {
			continue
		}
		out = append(out, x.e)
	}
	return out
}

// draw is step 5: weighted random over the intervals.
func draw(cands []Entry, rnd Rand) Entry {
	var total int64
	for _, e := range cands {
		total += weight(e)
	}
	f := rnd.Float64()
	if total == 0 {
		// Everything fully loaded: uniform rather than nothing.
		return cands[min(int(f*float64(len(cands))), len(cands)-1)]
	}
	x := int64(f * float64(total))
	var acc int64
	for _, e := range cands {
		acc += weight(e)
		if x < acc {
			return e
		}
	}
	return cands[len(cands)-1]
}
