package b2bua

import "github.com/outpost/outpost/siptarget"

// pstn parses PSTN gateway targets as the gateway's configuration does.
func pstn(ss ...string) []siptarget.Target {
	out := make([]siptarget.Target, 0, len(ss))
	for _, s := range ss {
		out = append(out, siptarget.MustParse(s, siptarget.UDP))
	}
	return out
}

// unparsedGateway is a target that did not come from siptarget.Parse.
var unparsedGateway = []siptarget.Target{{Host: "198.18.3.2"}}
