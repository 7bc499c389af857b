package store

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestInactiveMSRsSurviveReopen: the operator's flags are in the file: a
// reopened store has them, setting one twice keeps one row, and setting
// it active removes it.
func TestInactiveMSRsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outpost.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"msr-b", "msr-a", "msr-b"} {
		if err := s.SetMSRInactive(ctx, name, true, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.InactiveMSRs(ctx); err != nil || !slices.Equal(got, []string{"msr-a", "msr-b"}) {
		t.Fatalf("after reopen: %v %v", got, err)
	}
	if err := s.SetMSRInactive(ctx, "msr-a", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, err := s.InactiveMSRs(ctx); err != nil || !slices.Equal(got, []string{"msr-b"}) {
		t.Fatalf("after msr-a active again: %v %v", got, err)
	}
}
