package resolve

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A host name a redirect names is resolved with the configured servers
// (A, then AAAA) and cached; an IP literal needs no query; a name with no
// record is an error that says so.
func TestLookupHost(t *testing.T) {
	d := startDNS(t)
	d.add("pool2.hq.test. 60 IN A 198.18.1.21", "pool2.hq.test. 60 IN AAAA 2001:db8::21")
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want := []netip.Addr{netip.MustParseAddr("198.18.1.21"), netip.MustParseAddr("2001:db8::21")}
	for range 2 {
		got, err := r.LookupHost(ctx, "Pool2.HQ.test.")
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("LookupHost = %v, %v; want %v", got, err, want)
		}
	}
	if n := d.count("pool2.hq.test.", dns.TypeA, "udp"); n != 1 {
		t.Errorf("%d A queries for two lookups, want 1 (cached)", n)
	}
	got, err := r.LookupHost(ctx, "[2001:db8::7]")
	if err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("2001:db8::7")}) {
		t.Errorf("IP literal: %v, %v", got, err)
	}
	if d.total() != 2 {
		t.Errorf("%d queries, want 2 (an IP literal asks nothing)", d.total())
	}
	if _, err := r.LookupHost(ctx, "gone.hq.test"); !errors.Is(err, ErrNoSuchHost) {
		t.Errorf("unknown host: %v, want ErrNoSuchHost", err)
	}
	if _, err := r.LookupHost(ctx, "bad host"); err == nil {
		t.Error("an invalid host name was looked up")
	}
}
