package resolve

import (
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/outpost/outpost/siptarget"
)

// tls looks up _sips._tcp, then _sip._tls when the first has no records,
// before the domain's own addresses.
func TestTLSFallsBackToSipTLS(t *testing.T) {
	d := startDNS(t)
	d.add("_sip._tls.hq.test. 60 IN SRV 10 10 5061 a.hq.test.", "a.hq.test. 60 IN A 198.18.1.10", "hq.test. 60 IN A 198.18.1.99")
	r := newResolver(t, Config{Domain: "hq.test", Transport: siptarget.TLS, Servers: []string{d.addr}})
	if got, want := addrs(resolve(t, r)), []string{"198.18.1.10:5061"}; !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v (from _sip._tls)", got, want)
	}
	if d.count("_sips._tcp.hq.test.", dns.TypeSRV, "udp") != 1 {
		t.Error("_sips._tcp was not asked first")
	}

	// Both present: _sips._tcp wins.
	d.add("_sips._tcp.hq.test. 60 IN SRV 10 10 5061 b.hq.test.", "b.hq.test. 60 IN A 198.18.1.11")
	r = newResolver(t, Config{Domain: "hq.test", Transport: siptarget.TLS, Servers: []string{d.addr}})
	if got, want := addrs(resolve(t, r)), []string{"198.18.1.11:5061"}; !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v (from _sips._tcp)", got, want)
	}
}

// A configured service label replaces the transport's, with no fallback
// label (its absence falls back to A/AAAA as usual).
func TestSRVServiceLabel(t *testing.T) {
	d := startDNS(t)
	d.add("_sipinternaltls._tcp.hq.test. 60 IN SRV 0 0 5061 pool.hq.test.", "pool.hq.test. 60 IN A 198.18.1.20",
		"_sips._tcp.hq.test. 60 IN SRV 10 10 5061 b.hq.test.", "b.hq.test. 60 IN A 198.18.1.11")
	r := newResolver(t, Config{Domain: "hq.test", Transport: siptarget.TLS, SRVService: "_sipinternaltls._tcp", Servers: []string{d.addr}})
	ts := resolve(t, r)
	if got, want := addrs(ts), []string{"198.18.1.20:5061"}; !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	if ts[0].Transport != siptarget.TLS {
		t.Errorf("transport %s, want tls", ts[0].Transport)
	}
	for _, bad := range []string{"sip.tcp", "_sip", "_a._b._c", "_sip._tcp.."} {
		if _, err := New(Config{Domain: "hq.test", SRVService: bad, Servers: []string{d.addr}}); err == nil {
			t.Errorf("SRVService %q accepted", bad)
		}
	}
}
