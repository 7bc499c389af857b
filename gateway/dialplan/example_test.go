package dialplan_test

import (
	"fmt"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/mode"
)

func Example() {
	p, err := dialplan.Compile(dialplan.Config{
		Rules: []dialplan.Rule{
			{Name: "branch", Match: `^1\d{3}$`, Route: dialplan.RouteLocal},
			{Name: "hq", Match: `^2\d{3}$`, Route: dialplan.RouteHQ,
				Survivable: &dialplan.Alt{Route: dialplan.RoutePSTN, Prepend: "+7495555"}},
			{Name: "national", Match: `^8\d{10}$`, Route: dialplan.RoutePSTN, Strip: 1, Prepend: "+7"},
		},
		Inbound:    []dialplan.Inbound{{Match: `^\+784355501(\d{2})$`, To: "10$1"}},
		Emergency:  []string{"112"},
		Extensions: []string{"1001"},
	})
	if err != nil {
		panic(err)
	}
	for _, md := range []mode.Mode{mode.Normal, mode.Survivable} {
		d, ok := p.Outbound("2001", md)
		fmt.Println(ok, d.Route, d.Target)
		fmt.Println(d.Explain)
	}
	d, _ := p.Outbound("112", mode.Standalone)
	fmt.Println(d.Route, d.Target, d.Rule)
	_, ok := p.Outbound("5555", mode.Normal)
	fmt.Println(ok)
	fmt.Println(p.InboundDID("+78435550101"))
	// Output:
	// true hq 2001
	// rule 1 "hq" (^2\d{3}$) matched 2001; normal mode: route hq, strip 0, prepend "" -> 2001
	// true pstn +74955552001
	// rule 1 "hq" (^2\d{3}$) matched 2001; survivable mode: route pstn, strip 0, prepend "+7495555" -> +74955552001
	// pstn 112 emergency
	// false
	// 1001 0 true
}
