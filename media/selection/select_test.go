package selection

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// fixed is a Rand that returns the same value every time.
type fixed float64

func (f fixed) Float64() float64 { return float64(f) }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func ent(msr, iface string, load int, coef float64) Entry {
	return Entry{
		MSR: msr, Interface: iface, Addr: netip.MustParseAddr("198.18.0.1"),
		Zone: "default", Site: "kazan", Load: load, Coefficient: coef,
		Registered: true, Active: true, Expires: t0.Add(time.Hour),
	}
}

// The docs/design.md §1 worked example: loads 55/40/60, coefficients
// 1.0/0.9/1.2. The formula (100 − load) × coefficient gives weights 45, 54,
// 48, hence intervals 0–45, 45–99, 99–147 (the ECSS-10 text's 56 for the
// second weight is a slip: the formula is pinned here).
func TestWorkedExample(t *testing.T) {
	es := []Entry{ent("msr-a", "lan0", 55, 1.0), ent("msr-b", "lan0", 40, 0.9), ent("msr-c", "lan0", 60, 1.2)}
	iv := Intervals(es)
	want := [][2]float64{{0, 45}, {45, 99}, {99, 147}}
	for i, w := range want {
		if iv[i].Lo != w[0] || iv[i].Hi != w[1] {
			t.Errorf("interval %d (%s) = %v–%v, want %v–%v", i, iv[i].Entry.MSR, iv[i].Lo, iv[i].Hi, w[0], w[1])
		}
	}
	req := Request{Zone: "default", Site: "kazan", Now: t0}
	// The draw r = f × 147 falls in exactly one interval.
	for _, c := range []struct {
		r    float64
		want string
	}{{0, "msr-a"}, {44.9, "msr-a"}, {45, "msr-b"}, {98.9, "msr-b"}, {99, "msr-c"}, {146.9, "msr-c"}} {
		got, err := Select(es, req, Policy{}, fixed(c.r/147))
		if err != nil || got.MSR != c.want {
			t.Errorf("draw %v: got %s, %v; want %s", c.r, got.MSR, err, c.want)
		}
	}
}

func TestForbiddenSiteNeverChosen(t *testing.T) {
	pol := Policy{Matrix: map[string]map[string]int{
		"kazan":  {"kazan": 5, "moscow": 5}, // "spb" missing: forbidden
		"moscow": {"moscow": 0},
	}}
	near := ent("msr-kazan", "lan0", 99, 0.1) // nearly no weight
	far := ent("msr-moscow", "lan0", 90, 1)
	far.Site = "moscow"
	forbidden := ent("msr-spb", "lan0", 0, 10) // would win almost every draw
	forbidden.Site = "spb"
	es := []Entry{near, far, forbidden}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		for _, req := range []Request{
			{Zone: "default", Site: "kazan", Now: t0},
			{Zone: "default", Site: "kazan", Now: t0, PreferMSR: "msr-spb"},
			{Zone: "default", Site: "kazan", Now: t0, MSRID: "msr-spb"},
		} {
			got, err := Select(es, req, pol, rnd)
			if err != nil {
				t.Fatalf("draw %d: %v", i, err)
			}
			if got.MSR == "msr-spb" {
				t.Fatalf("draw %d (%+v): forbidden site chosen", i, req)
			}
		}
	}
	// From a row with no allowed column at all: nothing.
	if _, err := Select([]Entry{forbidden}, Request{Zone: "default", Site: "kazan", Now: t0}, pol, rnd); !errors.Is(err, ErrNoResource) {
		t.Errorf("only a forbidden entry: err = %v, want ErrNoResource", err)
	}
}

// Many draws with a fixed seed follow the weights (Pearson's chi-square,
// 2 degrees of freedom; 13.82 is the 0.1 % critical value).
func TestDistributionChiSquare(t *testing.T) {
	es := []Entry{ent("msr-a", "lan0", 55, 1.0), ent("msr-b", "lan0", 40, 0.9), ent("msr-c", "lan0", 60, 1.2)}
	weights := map[string]float64{"msr-a": 45, "msr-b": 54, "msr-c": 48}
	const n = 30000
	rnd := rand.New(rand.NewPCG(20261129, 6))
	counts := map[string]int{}
	req := Request{Zone: "default", Site: "kazan", Now: t0}
	for range n {
		e, err := Select(es, req, Policy{}, rnd)
		if err != nil {
			t.Fatal(err)
		}
		counts[e.MSR]++
	}
	var chi2 float64
	for msr, w := range weights {
		exp := n * w / 147
		d := float64(counts[msr]) - exp
		chi2 += d * d / exp
	}
	t.Logf("counts %v, chi2 = %.3f", counts, chi2)
	if chi2 > 13.82 {
		t.Errorf("chi-square %.2f > 13.82: draws do not follow the weights %v", chi2, counts)
	}
}

func TestCandidates(t *testing.T) {
	matrix := map[string]map[string]int{
		"kazan":  {"kazan": 0, "moscow": 10, "spb": 0},
		"moscow": {"moscow": 0, "kazan": 10},
	}
	kz := func(msr, iface string) Entry { return ent(msr, iface, 50, 1) }
	mk := func(msr, iface, site string) Entry { e := kz(msr, iface); e.Site = site; return e }
	expired := kz("msr-old", "lan0")
	expired.Expires = t0
	inactive := kz("msr-off", "lan0")
	inactive.Active = false
	unreg := kz("msr-unreg", "lan0")
	unreg.Registered = false
	otherZone := kz("msr-zone", "lan0")
	otherZone.Zone = "dmz"
	local := kz("msr-local", "lan0")
	local.Expires = time.Time{} // local resources never expire

	names := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.MSR+"/"+e.Interface)
		}
		return out
	}
	cases := []struct {
		name    string
		entries []Entry
		req     Request
		pol     Policy
		want    []string
	}{
		{"filters status, activity, expiry and zone",
			[]Entry{expired, inactive, unreg, otherZone, local, kz("msr-b", "lan0")},
			Request{Zone: "default", Site: "kazan"}, Policy{},
			[]string{"msr-b/lan0", "msr-local/lan0"}},
		{"zone is exact", []Entry{otherZone}, Request{Zone: "dmz", Site: "kazan"}, Policy{}, []string{"msr-zone/lan0"}},
		{"nearest kept, 0 = equal",
			[]Entry{mk("msr-m", "lan0", "moscow"), mk("msr-k", "lan0", "kazan"), mk("msr-s", "lan0", "spb")},
			Request{Zone: "default", Site: "kazan"}, Policy{Matrix: matrix},
			[]string{"msr-k/lan0", "msr-s/lan0"}},
		{"row of the leg's site",
			[]Entry{mk("msr-m", "lan0", "moscow"), mk("msr-k", "lan0", "kazan"), mk("msr-s", "lan0", "spb")},
			Request{Zone: "default", Site: "moscow"}, Policy{Matrix: matrix},
			[]string{"msr-m/lan0"}},
		{"unknown leg site: all forbidden",
			[]Entry{mk("msr-k", "lan0", "kazan")},
			Request{Zone: "default", Site: "tver"}, Policy{Matrix: matrix}, nil},
		{"de-duplicated by MSR, smallest interface kept",
			[]Entry{kz("msr-a", "voice0"), kz("msr-a", "lan0"), kz("msr-a", "wan0"), kz("msr-b", "lan0")},
			Request{Zone: "default", Site: "kazan"}, Policy{},
			[]string{"msr-a/lan0", "msr-b/lan0"}},
		{"narrowed to the other leg's MSR",
			[]Entry{kz("msr-a", "lan0"), kz("msr-b", "voice0"), kz("msr-b", "lan0")},
			Request{Zone: "default", Site: "kazan", MSRID: "msr-b"}, Policy{},
			[]string{"msr-b/lan0"}},
		{"narrowing to an absent MSR keeps all",
			[]Entry{kz("msr-a", "lan0"), kz("msr-b", "lan0")},
			Request{Zone: "default", Site: "kazan", MSRID: "msr-x"}, Policy{},
			[]string{"msr-a/lan0", "msr-b/lan0"}},
		{"narrowing happens before ranking",
			[]Entry{mk("msr-k", "lan0", "kazan"), mk("msr-m", "lan0", "moscow")},
			Request{Zone: "default", Site: "kazan", MSRID: "msr-m"}, Policy{Matrix: matrix},
			[]string{"msr-m/lan0"}},
		{"calling leg's MSR preferred over nearer ones",
			[]Entry{mk("msr-k", "lan0", "kazan"), mk("msr-m", "lan0", "moscow")},
			Request{Zone: "default", Site: "kazan", PreferMSR: "msr-m"}, Policy{Matrix: matrix},
			[]string{"msr-m/lan0"}},
		{"calling leg's MSR in another zone: ignored",
			[]Entry{kz("msr-a", "lan0"), otherZone},
			Request{Zone: "default", Site: "kazan", PreferMSR: "msr-zone"}, Policy{},
			[]string{"msr-a/lan0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.req.Now.IsZero() {
				c.req.Now = t0
			}
			got := names(Candidates(c.entries, c.req, c.pol))
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestSelectEdges(t *testing.T) {
	req := Request{Zone: "default", Site: "kazan", Now: t0}
	if _, err := Select(nil, req, Policy{}, fixed(0)); !errors.Is(err, ErrNoResource) {
		t.Errorf("empty: %v", err)
	}
	// Fully loaded everywhere: uniform, not nothing.
	es := []Entry{ent("msr-a", "lan0", 100, 1), ent("msr-b", "lan0", 100, 1)}
	a, _ := Select(es, req, Policy{}, fixed(0.2))
	b, _ := Select(es, req, Policy{}, fixed(0.7))
	if a.MSR != "msr-a" || b.MSR != "msr-b" {
		t.Errorf("all loaded: %s, %s", a.MSR, b.MSR)
	}
	// A fully loaded MSR beside a free one is never drawn.
	es = []Entry{ent("msr-a", "lan0", 100, 1), ent("msr-b", "lan0", 10, 1)}
	for _, f := range []float64{0, 0.5, 0.999} {
		if e, _ := Select(es, req, Policy{}, fixed(f)); e.MSR != "msr-b" {
			t.Errorf("f=%v: drew the fully loaded MSR", f)
		}
	}
	// Coefficient 0 counts as 1; load is clamped.
	iv := Intervals([]Entry{ent("a", "x", -5, 0), ent("b", "x", 250, 2)})
	if iv[0].Hi != 100 || iv[1].Hi != 100 {
		t.Errorf("clamping: %+v", iv)
	}
}

// TestOwnSiteDistanceDefaultsToZero: a matrix that lists only the
// distance to another site still lets a leg take a resource of its own
// site (distance 0, the nearest); a site it does not list stays forbidden.
func TestOwnSiteDistanceDefaultsToZero(t *testing.T) {
	own, far, other := ent("msr-own", "lan0", 10, 1), ent("msr-far", "lan0", 10, 1), ent("msr-other", "lan0", 10, 1)
	far.Site, other.Site = "moscow", "omsk"
	pol := Policy{Matrix: map[string]map[string]int{"kazan": {"moscow": 10}}}
	req := Request{Zone: "default", Site: "kazan", Now: t0}
	if e, err := Select([]Entry{far, own, other}, req, pol, fixed(0.99)); err != nil || e.MSR != "msr-own" {
		t.Errorf("with the own site's cell missing: %+v %v, want msr-own", e, err)
	}
	if e, err := Select([]Entry{far, other}, req, pol, fixed(0)); err != nil || e.MSR != "msr-far" {
		t.Errorf("without an own-site resource: %+v %v, want msr-far (omsk is forbidden)", e, err)
	}
}
