package selection

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParseRegister feeds ParseRegister what a hostile REGISTER could
// carry (the registrar passes header values through): it never panics,
// fails only with ErrNotMSR or ErrMalformed, and what it accepts is
// usable. The input is "Name|Iface-Name|Iface-Addr|Load|CC-Addr|CC-Port",
// an empty field meaning an absent header. Seeds:
// testdata/fuzz/FuzzParseRegister.
func FuzzParseRegister(f *testing.F) {
	f.Add("msr-kazan|lan0|198.18.1.1|37||")
	f.Fuzz(func(t *testing.T, in string) {
		parts := strings.SplitN(in, "|", 6)
		names := []string{HdrName, HdrIfaceName, HdrIfaceAddr, HdrLoad, HdrCCAddr, HdrCCPort}
		h := map[string]string{}
		for i, v := range parts {
			if v != "" {
				h[DefaultHeaderPrefix+names[i]] = v
			}
		}
		e, err := ParseRegister("", h, "<sip:x@198.18.0.1>", 60, t0)
		if err != nil {
			if !errors.Is(err, ErrNotMSR) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			if e != (Entry{}) {
				t.Fatalf("partial entry %+v with %v", e, err)
			}
			return
		}
		if e.MSR == "" || e.Interface == "" || !e.Addr.IsValid() || e.Load < 0 || e.Load > 100 ||
			!e.Registered || !e.Active || !e.Expires.Equal(t0.Add(60*time.Second)) {
			t.Fatalf("accepted an unusable entry %+v from %q", e, in)
		}
		if e.Control.IsValid() && e.Control.Port() == 0 {
			t.Fatalf("control port 0 from %q", in)
		}
	})
}
