package registrar

import (
	"context"
	"testing"
	"time"
)

// countingPersister records how many bindings each SaveBindings wrote.
type countingPersister struct {
	memPersister
	written int
}

func (c *countingPersister) SaveBindings(ctx context.Context, ups []Binding, dels []BindingKey) error {
	c.written += len(ups) + len(dels)
	return c.memPersister.SaveBindings(ctx, ups, dels)
}

// A refresh that changes only the expiry (and Call-ID, CSeq) is not
// written until the written expiry falls a quarter of the interval
// behind; any other change is written at once; a restart restores the
// last written expiry, which the phone's next refresh comes well before.
func TestQuietRefreshNotWritten(t *testing.T) {
	p := &countingPersister{memPersister: memPersister{rows: map[BindingKey]Binding{}}}
	r, clk := newTestRegistrar(t, Config{}, p)
	start := clk.now()
	refresh := func(callID string, cseq int, src string) {
		t.Helper()
		res := register(t, r, msg{aor: "1001", callID: callID, cseq: cseq, src: src, expires: "3600",
			contacts: []string{"<sip:1001@198.18.0.10>"}}, "pw1001")
		if res.StatusCode != 200 {
			t.Fatalf("REGISTER: %d %s", res.StatusCode, res.Reason)
		}
		if err := r.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	writtenExpiry := func() time.Time {
		t.Helper()
		for _, b := range p.rows {
			return b.Expires
		}
		t.Fatal("no row written")
		return time.Time{}
	}

	refresh("c1", 1, "")
	if p.written != 1 || !writtenExpiry().Equal(start.Add(time.Hour)) {
		t.Fatalf("first registration: %d written, expiry %v", p.written, writtenExpiry())
	}
	// Refreshes every minute (a phone behind a NAT), a new Call-ID each
	// time: not written while the written expiry is 45 min or more away.
	for i := 1; i <= 15; i++ {
		clk.add(time.Minute)
		refresh("c-refresh", i, "")
	}
	if p.written != 1 {
		t.Fatalf("%d bindings written after 15 quiet refreshes, want 1", p.written)
	}
	if got := r.Lookup("1001"); len(got) != 1 || !got[0].Expires.Equal(clk.now().Add(time.Hour)) {
		t.Fatalf("served binding %+v: the refresh must take effect in memory", got)
	}
	// A restart now restores the written expiry: 45 min away, far more
	// than the phone's minute.
	r2, _ := newTestRegistrar(t, Config{}, &p.memPersister)
	if err := r2.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := r2.Lookup("1001"); len(got) != 1 || !got[0].Expires.Equal(start.Add(time.Hour)) {
		t.Fatalf("restored %+v", got)
	}
	// One more minute: the written expiry is now 44 min away, under three
	// quarters of the hour: written.
	clk.add(time.Minute)
	refresh("c-refresh", 16, "")
	if p.written != 2 || !writtenExpiry().Equal(clk.now().Add(time.Hour)) {
		t.Fatalf("stale expiry: %d written, expiry %v, want %v", p.written, writtenExpiry(), clk.now().Add(time.Hour))
	}
	// The phone moves (a new source address): written at once.
	clk.add(time.Minute)
	refresh("c-refresh", 17, "198.18.0.99:5060")
	if p.written != 3 {
		t.Fatalf("a moved binding was not written: %d", p.written)
	}
	for _, b := range p.rows {
		if b.Source != "udp:198.18.0.99:5060" {
			t.Fatalf("written source %q", b.Source)
		}
	}
}
