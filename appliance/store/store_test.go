package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func openTest(t testing.TB) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "var", "lib", "outpost", "outpost.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenCreatesDirAndFile(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a", "b", "outpost.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	for _, d := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("db mode %v, want 0600", fi.Mode().Perm())
	}

	// The settings the durability argument rests on.
	var mode string
	var syncMode, fk, busy int
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v", mode, err)
	}
	if err := s.db.QueryRow("PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != 2 {
		t.Errorf("synchronous = %d, %v", syncMode, err)
	}
	if err := s.db.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v", fk, err)
	}
	if err := s.db.QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil || busy != 5000 {
		t.Errorf("busy_timeout = %d, %v", busy, err)
	}
}

func TestOpenOddPath(t *testing.T) {
	// '?', '#' and '%' are URI syntax in the file: DSN.
	path := filepath.Join(t.TempDir(), "we?ird#dir%20", "out?post.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyConfig(context.Background(), []byte("{}"), "test"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the requested path: %v", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outpost.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyConfig(ctx, []byte(`{"a":1}`), "default"); err != nil {
		t.Fatal(err)
	}
	v2, err := s.ApplyConfig(ctx, []byte(`{"a":2}`), "api")
	if err != nil {
		t.Fatal(err)
	}
	b := testBinding("sip:100@example.com", "sip:100@10.0.0.1:5060", now().Add(3600e9))
	if err := s.SaveBindings(ctx, []Binding{b}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, doc, err := s.ActiveConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != v2 || string(doc) != `{"a":2}` {
		t.Errorf("after reopen: %+v %q, want %+v", v, doc, v2)
	}
	h, err := s.History(ctx)
	if err != nil || len(h) != 2 {
		t.Fatalf("History = %v, %v", h, err)
	}
	got, err := s.LoadBindings(ctx, now())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != b {
		t.Errorf("bindings after reopen = %+v, want %+v", got, b)
	}
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != len(mustMigrations(t)) {
		t.Errorf("schema_migrations rows = %d, %v (migrations must not re-run)", n, err)
	}
}

func TestOpenRefusesForeignDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE users (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(context.Background(), path); !errors.Is(err, ErrNotStore) {
		t.Fatalf("Open(foreign db) = %v, want ErrNotStore", err)
	}

	path2 := filepath.Join(t.TempDir(), "other2.db")
	db, err = sql.Open("sqlite", path2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA application_id = 42"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(context.Background(), path2); !errors.Is(err, ErrNotStore) {
		t.Fatalf("Open(db with foreign application_id) = %v, want ErrNotStore", err)
	}
}

func TestOpenEmptyPath(t *testing.T) {
	if _, err := Open(context.Background(), ""); err == nil {
		t.Fatal("Open(\"\") succeeded")
	}
}

func TestClosedStore(t *testing.T) {
	s := openTest(t)
	s.Close()
	if _, _, err := s.ActiveConfig(context.Background()); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("ActiveConfig on closed store = %v, want a closed error", err)
	}
}

func mustMigrations(t *testing.T) []migration {
	t.Helper()
	migs, err := loadMigrations(embeddedMigrations())
	if err != nil {
		t.Fatal(err)
	}
	return migs
}
