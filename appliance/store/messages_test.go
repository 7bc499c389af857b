package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Kept messages survive a reopen, in order, bounded per user and in
// total; delivered and expired ones go.
func TestOfflineMessages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "box.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	keep := func(to, text string, when time.Time) error {
		return s.KeepMessage(t.Context(), &OfflineMessage{Addressee: to, Sender: "1001", Display: "Anna", ContentType: "text/plain", Body: []byte(text), Received: when}, 2, 3)
	}
	for i, m := range []struct{ to, text string }{{"1002", "one"}, {"1002", "two"}, {"1003", "three"}} {
		if err := keep(m.to, m.text, at.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := keep("1002", "per user", at); !errors.Is(err, ErrMailboxFull) {
		t.Errorf("third for 1002: %v, want ErrMailboxFull", err)
	}
	if err := keep("1004", "total", at); !errors.Is(err, ErrMailboxFull) {
		t.Errorf("fourth in all: %v, want ErrMailboxFull", err)
	}
	s.Close()
	if s, err = Open(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ms, err := s.PendingMessages(t.Context(), "1002")
	if err != nil || len(ms) != 2 || string(ms[0].Body) != "one" || string(ms[1].Body) != "two" || ms[0].Display != "Anna" || !ms[0].Received.Equal(at) {
		t.Fatalf("1002's messages after a reopen: %+v %v", ms, err)
	}
	if err := s.DeleteMessage(t.Context(), ms[0].ID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneMessages(t.Context(), at.Add(90*time.Minute)); err != nil || n != 1 {
		t.Errorf("prune: %d %v, want 1 (\"two\")", n, err)
	}
	all, err := s.AllPendingMessages(t.Context())
	if err != nil || len(all) != 1 || all[0].Addressee != "1003" {
		t.Errorf("left: %+v %v, want 1003's", all, err)
	}
}
