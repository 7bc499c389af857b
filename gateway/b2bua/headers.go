package b2bua

import (
	"strings"

	"github.com/emiago/sipgo/sip"
)

// headered is a SIP message's header list (*sip.Request, *sip.Response).
type headered interface{ Headers() []sip.Header }

// headerNamed returns m's first header with one of names (a full name
// and its compact form), nil if there is none. headersNamed returns them
// all, in order. Why not sipgo's GetHeader and GetHeaders: they lower
// the name of every header they pass over, an allocation for each name
// outside sipgo's short table (Session-Expires, Supported, Allow,
// RSeq...), and the B2BUA asks a dozen questions of each call's messages
// (BenchmarkCall: 30 allocations a call).
func headerNamed(m headered, names ...string) sip.Header {
	for _, h := range m.Headers() {
		if nameIn(h.Name(), names) {
			return h
		}
	}
	return nil
}

func headersNamed(m headered, names ...string) []sip.Header {
	var hs []sip.Header
	for _, h := range m.Headers() {
		if nameIn(h.Name(), names) {
			hs = append(hs, h)
		}
	}
	return hs
}

func nameIn(name string, names []string) bool {
	for _, n := range names {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}
