package store

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

// withExtra returns the embedded migrations plus extra files.
func withExtra(t *testing.T, extra map[string]string) fs.FS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(embeddedMigrations(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(embeddedMigrations(), p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range extra {
		m[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return m
}

func TestEmbeddedMigrations(t *testing.T) {
	migs, err := loadMigrations(embeddedMigrations())
	if err != nil {
		t.Fatal(err)
	}
	if migs[0].name != "0001_init.sql" {
		t.Fatalf("first migration %q", migs[0].name)
	}
	if len(migs) < 2 || migs[1].name != "0002_cdr.sql" {
		t.Fatalf("second migration missing or renamed: %v", migs)
	}
}

func TestMigrationsAppliedInOrderOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outpost.db")

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyConfig(ctx, []byte("v1"), "default"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A later binary adds two migrations; 0008 depends on 0007.
	src := withExtra(t, map[string]string{
		"0007_notes.sql": `CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL) STRICT;
			INSERT INTO notes (body) SELECT 'migrated from ' || version FROM config_versions;`,
		"0008_notes_idx.sql": `ALTER TABLE notes ADD COLUMN tag TEXT NOT NULL DEFAULT 'x';
			CREATE INDEX notes_tag ON notes (tag);`,
	})
	for range 2 { // second open must not re-run anything
		s, err = openWith(ctx, path, src)
		if err != nil {
			t.Fatal(err)
		}
		var body, tag string
		if err := s.db.QueryRow("SELECT body, tag FROM notes").Scan(&body, &tag); err != nil {
			t.Fatal(err)
		}
		if body != "migrated from 1" || tag != "x" {
			t.Errorf("notes = %q %q", body, tag)
		}
		rows, err := s.db.Query("SELECT version, name FROM schema_migrations ORDER BY version")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var v int
			var n string
			rows.Scan(&v, &n)
			got = append(got, n)
		}
		rows.Close()
		if strings.Join(got, ",") != "0001_init.sql,0002_cdr.sql,0003_msr_admin.sql,0004_messages.sql,0005_services.sql,0006_voicemail.sql,0007_notes.sql,0008_notes_idx.sql" {
			t.Errorf("schema_migrations = %v", got)
		}
		if _, doc, err := s.ActiveConfig(ctx); err != nil || string(doc) != "v1" {
			t.Errorf("data lost across migration: %q %v", doc, err)
		}
		s.Close()
	}
}

func TestRefuseNewerDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outpost.db")
	s, err := openWith(ctx, path, withExtra(t, map[string]string{
		"0007_future.sql": "CREATE TABLE future (x INTEGER) STRICT;",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyConfig(ctx, []byte("keep me"), "api"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The current binary only knows 0001.
	_, err = Open(ctx, path)
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open(newer db) = %v, want ErrSchemaTooNew", err)
	}
	for _, want := range []string{"migration 7", "0007_future.sql", "up to 6"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// Refusal must not have touched the file: the newer binary still opens it.
	s, err = openWith(ctx, path, withExtra(t, map[string]string{
		"0007_future.sql": "CREATE TABLE future (x INTEGER) STRICT;",
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, doc, err := s.ActiveConfig(ctx); err != nil || string(doc) != "keep me" {
		t.Fatalf("after refusal: %q %v", doc, err)
	}
}

func TestRefuseDivergentMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outpost.db")
	s, err := openWith(ctx, path, withExtra(t, map[string]string{"0007_a.sql": "CREATE TABLE a (x INTEGER) STRICT;"}))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = openWith(ctx, path, withExtra(t, map[string]string{"0007_b.sql": "CREATE TABLE b (x INTEGER) STRICT;"}))
	if err == nil || !strings.Contains(err.Error(), "0007_a.sql") {
		t.Fatalf("openWith(divergent 0007) = %v, want refusal naming 0007_a.sql", err)
	}
}

func TestFailedMigrationRollsBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outpost.db")
	bad := withExtra(t, map[string]string{
		"0007_ok.sql":  "CREATE TABLE ok2 (x INTEGER) STRICT;",
		"0008_bad.sql": "CREATE TABLE half (x INTEGER) STRICT; INSERT INTO no_such_table VALUES (1);",
	})
	if _, err := openWith(ctx, path, bad); err == nil || !strings.Contains(err.Error(), "0008_bad.sql") {
		t.Fatalf("openWith(bad migration) = %v, want error naming 0008_bad.sql", err)
	}
	// The embedded migrations and 0007 committed, 0008 left no trace.
	s, err := openWith(ctx, path, withExtra(t, map[string]string{"0007_ok.sql": "CREATE TABLE ok2 (x INTEGER) STRICT;"}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	s.db.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name IN ('ok2', 'half')").Scan(&n)
	if n != 1 {
		t.Errorf("found %d of ok2/half, want only ok2", n)
	}
	s.db.QueryRow("SELECT max(version) FROM schema_migrations").Scan(&n)
	if n != 7 {
		t.Errorf("max migration %d, want 7", n)
	}
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	for name, files := range map[string]fstest.MapFS{
		"gap":       {"0001_a.sql": {}, "0003_c.sql": {}},
		"duplicate": {"0001_a.sql": {}, "1_b.sql": {}},
		"zero":      {"0000_a.sql": {}, "0001_b.sql": {}},
		"bad name":  {"0001_a.sql": {}, "two.sql": {}},
		"empty":     {"README": {}},
	} {
		if _, err := loadMigrations(files); err == nil {
			t.Errorf("%s: loadMigrations accepted %v", name, files)
		}
	}
	if _, err := loadMigrations(fstest.MapFS{"0002_b.sql": {}, "0001_a.sql": {}, "README.md": {}}); err != nil {
		t.Errorf("valid set rejected: %v", err)
	}
}

func TestConcurrentOpen(t *testing.T) {
	// Two opens racing on a fresh file (e.g. daemon and CLI) must both
	// succeed and apply each migration once.
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outpost.db")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	stores := make([]*Store, 4)
	for i := range errs {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var n int
	stores[0].db.QueryRow("SELECT count(*) FROM schema_migrations").Scan(&n)
	if want := len(mustMigrations(t)); n != want {
		t.Fatalf("%d schema_migrations rows, want %d", n, want)
	}
}
