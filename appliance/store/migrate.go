package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

func embeddedMigrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // cannot happen: the directory is embedded
	}
	return sub
}

type migration struct {
	version int
	name    string // file name, e.g. "0001_init.sql"
	sql     string
}

var migrationName = regexp.MustCompile(`^([0-9]+)_[A-Za-z0-9_-]+\.sql$`)

// loadMigrations reads NNNN_name.sql files from the root of src. Versions
// must be unique and contiguous from 1; anything else is a build mistake.
func loadMigrations(src fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(src, ".")
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var migs []migration
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("store: bad migration file name %q (want NNNN_name.sql)", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v < 1 {
			return nil, fmt.Errorf("store: bad migration number in %q", e.Name())
		}
		body, err := fs.ReadFile(src, e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", e.Name(), err)
		}
		migs = append(migs, migration{version: v, name: e.Name(), sql: string(body)})
	}
	slices.SortFunc(migs, func(a, b migration) int { return a.version - b.version })
	for i, m := range migs {
		if m.version != i+1 {
			return nil, fmt.Errorf("store: migrations must be numbered 1..N without gaps or duplicates; found %s at position %d", m.name, i+1)
		}
	}
	if len(migs) == 0 {
		return nil, errors.New("store: no migrations")
	}
	return migs, nil
}

// migrate applies the missing migrations in order, each in its own IMMEDIATE
// transaction together with its schema_migrations row, so a crash leaves the
// schema at a migration boundary. A database that records a migration this
// binary does not have is refused before anything is written.
func (s *Store) migrate(ctx context.Context, migs []migration) error {
	if err := s.checkIdentity(ctx); err != nil {
		return err
	}
	applied, err := appliedMigrations(ctx, s.db)
	if err != nil {
		return err
	}
	// Refuse before writing anything.
	latest := migs[len(migs)-1].version
	versions := slices.Sorted(maps.Keys(applied))
	slices.Reverse(versions) // report the newest unknown one
	for _, v := range versions {
		name := applied[v]
		if v > latest || v < 1 {
			return fmt.Errorf("%w: %s has migration %d (%s) applied, this binary knows up to %d; refusing to open (upgrade outpostd or restore a matching database)",
				ErrSchemaTooNew, s.path, v, name, latest)
		}
		if want := migs[v-1].name; name != want {
			// Two builds numbered different migrations alike: the schema
			// is not the one this binary expects.
			return fmt.Errorf("store: %s has migration %d recorded as %q, this binary's is %q; refusing to open",
				s.path, v, name, want)
		}
	}
	for _, m := range migs {
		if _, ok := applied[m.version]; ok {
			continue
		}
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			// Re-check under the write lock: another process may have
			// applied it since we looked.
			now, err := appliedMigrations(ctx, tx)
			if err != nil {
				return err
			}
			if _, ok := now[m.version]; ok {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("store: migration %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx,
				"INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
				m.version, m.name, toNanos(s.now())); err != nil {
				return fmt.Errorf("store: record migration %s: %w", m.name, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// appliedMigrations returns version -> name of the recorded migrations; an
// absent schema_migrations table means none (a fresh database).
func appliedMigrations(ctx context.Context, q querier) (map[int]string, error) {
	var n int
	if err := q.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").Scan(&n); err != nil {
		return nil, fmt.Errorf("store: read schema: %w", err)
	}
	applied := map[int]string{}
	if n == 0 {
		return applied, nil
	}
	rows, err := q.QueryContext(ctx, "SELECT version, name FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("store: read schema_migrations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			return nil, fmt.Errorf("store: read schema_migrations: %w", err)
		}
		applied[v] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read schema_migrations: %w", err)
	}
	return applied, nil
}

// checkIdentity refuses SQLite files that belong to something else: a
// foreign application_id, or tables present but no schema_migrations.
func (s *Store) checkIdentity(ctx context.Context) error {
	var id int64
	if err := s.db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&id); err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	if id == applicationID {
		return nil
	}
	if id != 0 {
		return fmt.Errorf("%w: %s has application_id %#x", ErrNotStore, s.path, id)
	}
	var tables, ours int
	if err := s.db.QueryRowContext(ctx,
		"SELECT count(*), count(*) FILTER (WHERE name = 'schema_migrations') FROM sqlite_schema WHERE type = 'table'").Scan(&tables, &ours); err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	if tables > 0 && ours == 0 {
		return fmt.Errorf("%w: %s has tables but no schema_migrations", ErrNotStore, s.path)
	}
	return nil
}
