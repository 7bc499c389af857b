package gateway

import "testing"

func TestContactURI(t *testing.T) {
	for in, want := range map[string]string{
		`<sip:1002@198.18.0.20:5062;transport=UDP>`:                   "sip:1002@198.18.0.20:5062;transport=UDP",
		`"Alice, Front" <sip:1002@198.18.0.20>;+sip.instance="<urn>"`: "sip:1002@198.18.0.20",
		`sip:1002@198.18.0.20;expires=60`:                             "sip:1002@198.18.0.20",
		` <sips:1002@example.com> `:                                   "sips:1002@example.com",
	} {
		if got := contactURI(in); got != want {
			t.Errorf("contactURI(%q) = %q, want %q", in, got, want)
		}
	}
}
