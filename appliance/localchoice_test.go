package appliance

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/netcfg"
)

// TestLocalChooser: with two of the box's addresses on the peer's subnet
// the choice follows media/selection's weights (performance coefficients
// 3 : 1 here, equal load); with one, or none on the peer's subnet, the
// routing table decides.
func TestLocalChooser(t *testing.T) {
	st := netcfg.State{Addrs: []netcfg.Addr{
		{LinkName: "vlan10a", Prefix: netip.MustParsePrefix("198.18.10.1/24")},
		{LinkName: "vlan10b", Prefix: netip.MustParsePrefix("198.18.10.2/24")},
		{LinkName: "wan0", Prefix: netip.MustParsePrefix("198.18.1.1/24")},
	}}
	doc := &config.Document{Site: config.Site{Name: "branch1", Zone: "kzn", Site: "b1"},
		MediaResources: config.MediaResources{Performance: map[string]float64{"branch1/vlan10a": 3, "branch1/vlan10b": 1}}}
	a := &App{net0: st, net: netcfg.NewWatcher(nil, netcfg.Config{}, nil)}
	parts, err := translate(doc, environment{Net: st})
	if err != nil {
		t.Fatal(err)
	}
	a.cur.Store(&running{doc: doc, parts: parts})
	c := &localChooser{a: a, rnd: rand.New(rand.NewPCG(1, 2))}
	all := []netip.Addr{netip.MustParseAddr("198.18.10.1"), netip.MustParseAddr("198.18.10.2"), netip.MustParseAddr("198.18.1.1")}

	counts := map[netip.Addr]int{}
	const draws = 4000
	for range draws {
		got, ok := c.choose(netip.MustParseAddr("198.18.10.50"), all)
		if !ok {
			t.Fatal("two on-link candidates: no choice made")
		}
		counts[got]++
	}
	a10, b10 := counts[all[0]], counts[all[1]]
	if a10+b10 != draws || a10 < 2800 || a10 > 3200 {
		t.Fatalf("choices %v: want about 3000 : 1000 (coefficients 3 : 1)", counts)
	}
	if _, ok := c.choose(netip.MustParseAddr("198.18.1.10"), all); ok {
		t.Error("one on-link candidate: the routing table should decide")
	}
	if _, ok := c.choose(netip.MustParseAddr("203.0.113.9"), all); ok {
		t.Error("no on-link candidate: the routing table should decide")
	}
	if _, ok := c.choose(netip.MustParseAddr("198.18.10.50"), all[1:]); ok {
		t.Error("only one of the on-link addresses is a listener: nothing to choose")
	}
}
