package config

import (
	"testing"

	"github.com/outpost/outpost/siptarget"
)

// The document accepts exactly the SIP targets the parts parse
// (siptarget.Parse), with the parser's message, in hq.targets,
// pstn.gateways[].target and msr.servers.
func TestTargetsAsParsed(t *testing.T) {
	inputs := []string{"198.18.1.10:5060", "hq.example.com", "tls:hq.example.com", "TCP:[2001:db8::1]", "[2001:db8::1]",
		"udp:198.18.1.10", "tls:h:0", "2001:db8::1", "hq_1.example.com:5060", "sip:h:5060", "[198.18.1.10]:5060", "h:"}
	for _, in := range inputs {
		for _, tc := range []struct {
			path string
			def  siptarget.Transport
			set  func(d *Document)
		}{
			{"hq.targets[0]", "tcp", func(d *Document) { d.HQ.Targets, d.HQ.Transport = []string{in}, "tcp" }},
			{"pstn.gateways[0].target", "udp", func(d *Document) { d.PSTN.Gateways[0].Target = in }},
			{"msr.servers[0]", "udp", func(d *Document) { d.MSR.Servers = []string{in} }},
		} {
			d := loadFile(t, "testdata/valid/full.json")
			if len(d.PSTN.Gateways) == 0 {
				t.Fatal("full.json has no PSTN gateway")
			}
			tc.set(d)
			_, perr := siptarget.Parse(in, tc.def)
			var got string
			for _, e := range d.Validate() {
				if e.Path == tc.path {
					got = e.Message
				}
			}
			switch {
			case perr == nil && got != "":
				t.Errorf("%s %q: refused (%s), parser accepts", tc.path, in, got)
			case perr != nil && got != perr.Error():
				t.Errorf("%s %q: message %q, parser says %q", tc.path, in, got, perr)
			}
		}
	}
}
