package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestConfigEmpty(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, _, err := s.ActiveConfig(ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("ActiveConfig on empty store = %v, want ErrNotFound", err)
	}
	if _, _, err := s.Config(ctx, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Config(1) on empty store = %v, want ErrNotFound", err)
	}
	if err := s.Activate(ctx, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Activate(1) on empty store = %v, want ErrNotFound", err)
	}
	h, err := s.History(ctx)
	if err != nil || h == nil || len(h) != 0 {
		t.Errorf("History on empty store = %#v, %v; want empty non-nil", h, err)
	}
	if b, _ := json.Marshal(h); string(b) != "[]" {
		t.Errorf("History JSON = %s, want []", b)
	}
}

func TestApplyConfigHistory(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	clock := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("X", 3600))
	s.now = func() time.Time { clock = clock.Add(time.Second); return clock }

	docs := []struct {
		doc    []byte
		source string
	}{
		{[]byte(`{"v":1}`), "default"},
		{[]byte(`{"v":2}`), "file:/etc/outpost/outpost.json"},
		{[]byte(`{"v":3}`), "api"},
		{[]byte(`{"v":1}`), "rollback:1"}, // same bytes again: still a new version
		{nil, "api"},                      // empty document is stored as-is
	}
	var applied []Version
	for i, d := range docs {
		v, err := s.ApplyConfig(ctx, d.doc, d.source)
		if err != nil {
			t.Fatalf("ApplyConfig #%d: %v", i, err)
		}
		want := Version{Version: int64(i + 1), AppliedAt: clock.UTC(), Source: d.source, SHA256: sha(d.doc), Active: true}
		if v != want {
			t.Fatalf("ApplyConfig #%d = %+v, want %+v", i, v, want)
		}
		applied = append(applied, v)

		av, adoc, err := s.ActiveConfig(ctx)
		if err != nil || av != v || string(adoc) != string(d.doc) {
			t.Fatalf("ActiveConfig after #%d = %+v %q %v", i, av, adoc, err)
		}
	}

	h, err := s.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != len(docs) {
		t.Fatalf("History has %d entries, want %d", len(h), len(docs))
	}
	for i, v := range h { // newest first
		want := applied[len(applied)-1-i]
		want.Active = i == 0
		if v != want {
			t.Errorf("History[%d] = %+v, want %+v", i, v, want)
		}
	}

	for i, d := range docs {
		v, doc, err := s.Config(ctx, int64(i+1))
		if err != nil {
			t.Fatalf("Config(%d): %v", i+1, err)
		}
		if string(doc) != string(d.doc) || v.SHA256 != sha(doc) || v.Active != (i == len(docs)-1) {
			t.Errorf("Config(%d) = %+v %q", i+1, v, doc)
		}
		if doc == nil {
			t.Errorf("Config(%d) returned a nil document, want non-nil", i+1)
		}
	}
	for _, missing := range []int64{0, -1, int64(len(docs) + 1)} {
		if _, _, err := s.Config(ctx, missing); !errors.Is(err, ErrNotFound) {
			t.Errorf("Config(%d) = %v, want ErrNotFound", missing, err)
		}
	}

	// JSON shape used by the API.
	b, _ := json.Marshal(h[0])
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"version", "applied_at", "source", "sha256", "active"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON of Version lacks %q: %s", k, b)
		}
	}
}

func TestActivate(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if _, err := s.ApplyConfig(ctx, fmt.Appendf(nil, `{"v":%d}`, i), "api"); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		version int64
		err     error
		active  int64
	}{
		{2, nil, 2},
		{2, nil, 2}, // already active: no-op
		{1, nil, 1},
		{3, nil, 3},
		{4, ErrNotFound, 3}, // unknown: nothing changes
		{0, ErrNotFound, 3},
	}
	for _, tt := range tests {
		err := s.Activate(ctx, tt.version)
		if !errors.Is(err, tt.err) {
			t.Fatalf("Activate(%d) = %v, want %v", tt.version, err, tt.err)
		}
		v, doc, err := s.ActiveConfig(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v.Version != tt.active || string(doc) != fmt.Sprintf(`{"v":%d}`, tt.active) {
			t.Fatalf("after Activate(%d): active %d %s, want %d", tt.version, v.Version, doc, tt.active)
		}
		h, _ := s.History(ctx)
		if len(h) != 3 {
			t.Fatalf("Activate created a version: %+v", h)
		}
		n := 0
		for _, hv := range h {
			if hv.Active {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d active versions after Activate(%d)", n, tt.version)
		}
	}
	// A new apply after an Activate still takes max+1.
	v, err := s.ApplyConfig(ctx, []byte("{}"), "api")
	if err != nil || v.Version != 4 {
		t.Fatalf("ApplyConfig after Activate = %+v, %v; want version 4", v, err)
	}
}

func TestOneActiveEnforcedBySchema(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	s.ApplyConfig(ctx, []byte("a"), "api")
	s.ApplyConfig(ctx, []byte("b"), "api")
	if _, err := s.db.Exec("UPDATE config_versions SET active = 1"); err == nil {
		t.Fatal("schema allowed two active versions")
	}
}

func TestApplyConfigConcurrent(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := s.ApplyConfig(ctx, fmt.Appendf(nil, "doc %d", i), "api")
			errs <- err
			s.ActiveConfig(ctx)
			s.History(ctx)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	h, err := s.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkHistory(h); err != nil {
		t.Fatal(err)
	}
	if len(h) != n {
		t.Fatalf("%d versions, want %d", len(h), n)
	}
}

// checkHistory verifies versions are N..1 without holes and exactly one is
// active (when any exist).
func checkHistory(h []Version) error {
	active := 0
	for i, v := range h {
		if want := int64(len(h) - i); v.Version != want {
			return fmt.Errorf("history not contiguous: position %d has version %d, want %d", i, v.Version, want)
		}
		if v.Active {
			active++
		}
	}
	if len(h) > 0 && active != 1 {
		return fmt.Errorf("%d active versions in %d", active, len(h))
	}
	return nil
}

func TestContextCancelled(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.ApplyConfig(ctx, []byte("x"), "api"); !errors.Is(err, context.Canceled) {
		t.Errorf("ApplyConfig with cancelled ctx = %v", err)
	}
	if _, _, err := s.ActiveConfig(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Errorf("cancelled apply left something behind: %v", err)
	}
}
