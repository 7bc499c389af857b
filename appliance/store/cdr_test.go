package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func TestCDRsAddQueryPrune(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var recs []CDR
	for i := range 10 {
		recs = append(recs, CDR{
			CallID: fmt.Sprintf("c%d", i), Started: base.Add(time.Duration(i) * time.Minute),
			Ended: base.Add(time.Duration(i)*time.Minute + 5*time.Second), Caller: "1001", Dialled: "2001",
			Routed: "2001", Route: "local", Target: "udp:127.0.0.1:5062", Mode: "standalone",
			Code: 200, Disposition: "answered", Hangup: "caller",
		})
	}
	recs[3].Answered = base.Add(3*time.Minute + time.Second)
	if err := s.AddCDRs(ctx, recs, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.CDRs(ctx, base.Add(3*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 || got[0].CallID != "c3" || !got[0].Answered.Equal(recs[3].Answered) || !got[1].Answered.IsZero() {
		t.Fatalf("since 10:03: got %d records, first %+v", len(got), got[0])
	}
	if got[0].Code != 200 || got[0].Disposition != "answered" || got[0].Target != "udp:127.0.0.1:5062" {
		t.Fatalf("fields lost: %+v", got[0])
	}
	if lim, _ := s.CDRs(ctx, time.Time{}, 2); len(lim) != 2 || lim[0].CallID != "c0" {
		t.Fatalf("limit 2: %+v", lim)
	}

	// Retention: one more record with keep=4 leaves the newest four.
	if err := s.AddCDRs(ctx, []CDR{{CallID: "c10", Started: base.Add(time.Hour)}}, 4); err != nil {
		t.Fatal(err)
	}
	all, err := s.CDRs(ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 || all[0].CallID != "c7" || all[3].CallID != "c10" {
		t.Fatalf("after pruning to 4: %v", all)
	}
}

func TestCDRsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outpost.db")
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddCDRs(ctx, []CDR{{CallID: "kept", Started: time.Now(), Disposition: "busy", Code: 486}}, 10); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.CDRs(ctx, time.Time{}, 0)
	if err != nil || len(got) != 1 || got[0].CallID != "kept" || got[0].Code != 486 {
		t.Fatalf("after reopen: %v %v", got, err)
	}
}
