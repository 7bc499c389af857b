package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// now returns the current time in the representation the store returns
// (UTC, no monotonic reading), so Bindings compare with ==.
func now() time.Time { return time.Unix(0, time.Now().UnixNano()).UTC() }

func testBinding(aor, contactURI string, expires time.Time) Binding {
	return Binding{
		AOR:        aor,
		ContactURI: contactURI,
		Contact:    "<" + contactURI + ">;expires=3600;+sip.instance=\"<urn:uuid:00000000-0000-1000-8000-000A95A0E128>\";reg-id=1;q=0.5",
		Source:     "udp:10.0.0.1:5060",
		Local:      "udp:127.0.0.1:5060",
		CallID:     "call-" + aor,
		CSeq:       4294967295,
		Q:          0.5,
		Expires:    expires,
		Registered: expires.Add(-time.Hour),
		UserAgent:  "Yealink SIP-T46U 108.86.0.20",
		Instance:   "<urn:uuid:00000000-0000-1000-8000-000A95A0E128>",
		RegID:      1,
	}
}

func bindingMap(bs []Binding) map[BindingKey]Binding {
	m := map[BindingKey]Binding{}
	for _, b := range bs {
		m[b.Key()] = b
	}
	return m
}

func TestBindings(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	t0 := now()
	later := t0.Add(time.Hour)

	a1 := testBinding("sip:100@pbx", "sip:100@10.0.0.1:5060", later)
	a2 := testBinding("sip:100@pbx", "sip:100@10.0.0.2:5060;transport=tcp", later)
	a2.Q = -1
	a2.Instance, a2.RegID = "", 0
	b1 := testBinding("sip:200@pbx", "sip:200@10.0.0.3:5060", later)
	expired := testBinding("sip:300@pbx", "sip:300@10.0.0.4:5060", t0.Add(-time.Second))
	edge := testBinding("sip:400@pbx", "sip:400@10.0.0.5:5060", t0) // expires == now: expired

	type step struct {
		name    string
		do      func() error
		loadAt  time.Time
		want    []*Binding
		wantRaw int // rows in the table after the load
	}
	steps := []step{
		{
			name:   "insert",
			do:     func() error { return s.SaveBindings(ctx, []Binding{a1, a2, b1, expired, edge}, nil) },
			loadAt: t0, want: []*Binding{&a1, &a2, &b1}, wantRaw: 3,
		},
		{
			name: "upsert refresh",
			do: func() error {
				a1.CSeq, a1.Expires, a1.Contact = 7, later.Add(time.Hour), "<sip:100@10.0.0.1:5060>;expires=7200"
				return s.SaveBindings(ctx, []Binding{a1}, nil)
			},
			loadAt: t0, want: []*Binding{&a1, &a2, &b1}, wantRaw: 3,
		},
		{
			name:   "delete one contact, delete unknown key",
			do:     func() error { return s.SaveBindings(ctx, nil, []BindingKey{a2.Key(), {"sip:nobody@pbx", "sip:x"}}) },
			loadAt: t0, want: []*Binding{&a1, &b1}, wantRaw: 2,
		},
		{
			name: "delete and upsert same key in one call: upsert wins",
			do: func() error {
				b1.CSeq = 99
				return s.SaveBindings(ctx, []Binding{b1}, []BindingKey{b1.Key()})
			},
			loadAt: t0, want: []*Binding{&a1, &b1}, wantRaw: 2,
		},
		{
			name: "duplicate key in upserts: last wins",
			do: func() error {
				x, y := a2, a2
				x.CSeq, y.CSeq = 1, 2
				a2 = y
				return s.SaveBindings(ctx, []Binding{x, y}, nil)
			},
			loadAt: t0, want: []*Binding{&a1, &a2, &b1}, wantRaw: 3,
		},
		{
			name:   "DeleteAORBindings",
			do:     func() error { return s.DeleteAORBindings(ctx, "sip:100@pbx") },
			loadAt: t0, want: []*Binding{&b1}, wantRaw: 1,
		},
		{
			name:   "DeleteAORBindings unknown AOR",
			do:     func() error { return s.DeleteAORBindings(ctx, "sip:999@pbx") },
			loadAt: t0, want: []*Binding{&b1}, wantRaw: 1,
		},
		{
			name:   "nothing to do",
			do:     func() error { return s.SaveBindings(ctx, nil, nil) },
			loadAt: t0, want: []*Binding{&b1}, wantRaw: 1,
		},
		{
			name:   "everything expires",
			do:     func() error { return nil },
			loadAt: later.Add(24 * time.Hour), want: []*Binding{}, wantRaw: 0,
		},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, err := s.LoadBindings(ctx, st.loadAt)
		if err != nil {
			t.Fatalf("%s: LoadBindings: %v", st.name, err)
		}
		if got == nil {
			t.Fatalf("%s: LoadBindings returned nil slice", st.name)
		}
		if len(got) != len(st.want) {
			t.Fatalf("%s: got %d bindings %+v, want %d", st.name, len(got), got, len(st.want))
		}
		for i := range got {
			if got[i] != *st.want[i] {
				t.Errorf("%s: binding %d\n got %+v\nwant %+v", st.name, i, got[i], *st.want[i])
			}
		}
		var raw int
		if err := s.db.QueryRow("SELECT count(*) FROM bindings").Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if raw != st.wantRaw {
			t.Errorf("%s: %d rows in table after LoadBindings, want %d (expired rows must be deleted)", st.name, raw, st.wantRaw)
		}
	}
}

func TestBindingsZeroTimes(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	b := Binding{AOR: "a", ContactURI: "c", Expires: now().Add(time.Minute)}
	if err := s.SaveBindings(ctx, []Binding{b}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadBindings(ctx, now())
	if err != nil || len(got) != 1 || got[0] != b || !got[0].Registered.IsZero() {
		t.Fatalf("got %+v, %v; want %+v", got, err, b)
	}
}

// TestSaveBindingsBatching exercises counts around the batch size, with
// deletes and upserts in one call, and checks the result against a model.
func TestSaveBindingsBatching(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	exp := now().Add(time.Hour)
	model := map[BindingKey]Binding{}
	gen := 0
	for _, n := range []int{1, 7, 8, 9, 63, 64, 65, 3*64 + 2*8 + 5, 2000} {
		gen++
		var ups []Binding
		var dels []BindingKey
		for i := range n {
			b := testBinding(fmt.Sprintf("sip:%d@pbx", i%500), fmt.Sprintf("sip:%d@10.0.%d.%d", i, gen, i%7), exp)
			b.CSeq = uint32(gen)
			ups = append(ups, b)
		}
		// Delete roughly a third of what exists, plus some unknown keys.
		i := 0
		for k := range model {
			if i%3 == 0 {
				dels = append(dels, k)
			}
			i++
		}
		for i := range n % 70 {
			dels = append(dels, BindingKey{"sip:ghost@pbx", fmt.Sprint(i)})
		}
		if err := s.SaveBindings(ctx, ups, dels); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for _, k := range dels {
			delete(model, k)
		}
		for _, b := range ups {
			model[b.Key()] = b
		}
		got, err := s.LoadBindings(ctx, now())
		if err != nil {
			t.Fatal(err)
		}
		gm := bindingMap(got)
		if len(got) != len(model) || len(gm) != len(model) {
			t.Fatalf("n=%d: %d bindings stored, model has %d", n, len(got), len(model))
		}
		for k, want := range model {
			if gm[k] != want {
				t.Fatalf("n=%d: %v = %+v, want %+v", n, k, gm[k], want)
			}
		}
	}
}

func TestDeleteUsesPrimaryKey(t *testing.T) {
	s := openTest(t)
	rows, err := s.db.Query("EXPLAIN QUERY PLAN "+deleteSQL(2), "a", "b", "c", "d")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	plan := ""
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan += detail + "\n"
	}
	t.Logf("plan:\n%s", plan)
	if !containsAny(plan, "USING PRIMARY KEY", "USING INDEX") || containsAny(plan, "SCAN bindings") {
		t.Errorf("batched delete does not use the primary key:\n%s", plan)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
	}
	return false
}

func TestSaveBindingsDuplicatesInOneStatement(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	exp := now().Add(time.Hour)
	var ups []Binding
	for i := range 64 + 8 + 3 { // fills the 64-, 8- and 1-row statements
		b := testBinding("sip:dup@pbx", "sip:dup@10.0.0.1", exp)
		b.CSeq = uint32(i)
		ups = append(ups, b)
	}
	if err := s.SaveBindings(ctx, ups, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadBindings(ctx, now())
	if err != nil || len(got) != 1 || got[0] != ups[len(ups)-1] {
		t.Fatalf("got %+v, %v; want only the last duplicate", got, err)
	}
}

func TestSaveBindingsAllOrNothing(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	exp := now().Add(time.Hour)
	var first []Binding
	for i := range 100 {
		first = append(first, testBinding(fmt.Sprintf("sip:%d@pbx", i), "sip:c", exp))
	}
	if err := s.SaveBindings(ctx, first, nil); err != nil {
		t.Fatal(err)
	}
	// Make the last row of the next call fail inside the transaction.
	if _, err := s.db.Exec(`CREATE TRIGGER boom BEFORE INSERT ON bindings WHEN NEW.aor = 'boom'
		BEGIN SELECT RAISE(ABORT, 'boom'); END`); err != nil {
		t.Fatal(err)
	}
	var second []Binding
	for i := range 100 {
		b := testBinding(fmt.Sprintf("sip:%d@pbx", i), "sip:c", exp)
		b.CSeq = 1
		second = append(second, b)
	}
	second = append(second, testBinding("boom", "sip:c", exp))
	dels := []BindingKey{first[0].Key(), first[1].Key()}
	if err := s.SaveBindings(ctx, second, dels); err == nil {
		t.Fatal("SaveBindings succeeded despite the failing row")
	}
	got, err := s.LoadBindings(ctx, now())
	if err != nil {
		t.Fatal(err)
	}
	gm := bindingMap(got)
	if len(got) != len(first) {
		t.Fatalf("%d bindings after failed call, want %d", len(got), len(first))
	}
	for _, b := range first {
		if gm[b.Key()] != b {
			t.Fatalf("failed call changed %v: %+v", b.Key(), gm[b.Key()])
		}
	}
	// The store is still usable afterwards.
	if err := s.SaveBindings(ctx, second[:100], dels); err != nil {
		t.Fatal(err)
	}
}
