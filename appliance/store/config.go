package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Version describes one applied configuration document.
type Version struct {
	Version   int64     `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
	// Source says where the document came from, e.g. "default",
	// "file:/etc/x.json", "api", "rollback:3". Stored as given.
	Source string `json:"source"`
	// SHA256 is the lowercase hex SHA-256 of the document bytes.
	SHA256 string `json:"sha256"`
	Active bool   `json:"active"`
}

// ApplyConfig stores doc as a new version (the highest existing version + 1;
// the first is 1) and makes it the active one, in one IMMEDIATE transaction.
// doc is opaque: it is neither parsed nor validated. A nil doc is stored as
// an empty document.
func (s *Store) ApplyConfig(ctx context.Context, doc []byte, source string) (Version, error) {
	if doc == nil {
		doc = []byte{} // a nil []byte would bind as NULL
	}
	sum := sha256.Sum256(doc)
	v := Version{Source: source, SHA256: hex.EncodeToString(sum[:]), Active: true}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var last int64
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM config_versions").Scan(&last); err != nil {
			return fmt.Errorf("store: apply config: %w", err)
		}
		v.Version = last + 1
		applied := toNanos(s.now())
		v.AppliedAt = fromNanos(applied)
		if _, err := tx.ExecContext(ctx, "UPDATE config_versions SET active = 0 WHERE active = 1"); err != nil {
			return fmt.Errorf("store: apply config: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO config_versions (version, applied_at, source, sha256, active, document) VALUES (?, ?, ?, ?, 1, ?)",
			v.Version, applied, v.Source, v.SHA256, doc); err != nil {
			return fmt.Errorf("store: apply config: %w", err)
		}
		return nil
	})
	if err != nil {
		return Version{}, err
	}
	return v, nil
}

const versionCols = "version, applied_at, source, sha256, active"

// ActiveConfig returns the active version and its document, or ErrNotFound
// when no configuration was ever applied.
func (s *Store) ActiveConfig(ctx context.Context) (Version, []byte, error) {
	return s.configWhere(ctx, "active = 1")
}

// Config returns the given version and its document, or ErrNotFound.
func (s *Store) Config(ctx context.Context, version int64) (Version, []byte, error) {
	return s.configWhere(ctx, "version = ?", version)
}

func (s *Store) configWhere(ctx context.Context, where string, args ...any) (Version, []byte, error) {
	var v Version
	var applied int64
	var doc []byte
	err := s.db.QueryRowContext(ctx,
		"SELECT "+versionCols+", document FROM config_versions WHERE "+where, args...).
		Scan(&v.Version, &applied, &v.Source, &v.SHA256, &v.Active, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, nil, ErrNotFound
	}
	if err != nil {
		return Version{}, nil, fmt.Errorf("store: read config: %w", err)
	}
	v.AppliedAt = fromNanos(applied)
	if doc == nil {
		doc = []byte{}
	}
	return v, doc, nil
}

// History returns every version, newest first, without documents. It
// returns an empty (non-nil) slice when nothing was applied yet.
func (s *Store) History(ctx context.Context) ([]Version, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+versionCols+" FROM config_versions ORDER BY version DESC")
	if err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	defer rows.Close()
	out := []Version{}
	for rows.Next() {
		var v Version
		var applied int64
		if err := rows.Scan(&v.Version, &applied, &v.Source, &v.SHA256, &v.Active); err != nil {
			return nil, fmt.Errorf("store: history: %w", err)
		}
		v.AppliedAt = fromNanos(applied)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: history: %w", err)
	}
	return out, nil
}

// Activate makes an existing version the active one again without creating
// a new version. It exists to restore the previous configuration after a
// live apply failed; a user-visible rollback should instead ApplyConfig the
// old document with source "rollback:N" so it shows up in the history.
// Activating the already active version is a no-op. Unknown versions give
// ErrNotFound.
func (s *Store) Activate(ctx context.Context, version int64) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		var active bool
		err := tx.QueryRowContext(ctx, "SELECT active FROM config_versions WHERE version = ?", version).Scan(&active)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store: activate %d: %w", version, err)
		}
		if active {
			return nil
		}
		// Deactivate first: the partial unique index allows one active row.
		if _, err := tx.ExecContext(ctx, "UPDATE config_versions SET active = 0 WHERE active = 1"); err != nil {
			return fmt.Errorf("store: activate %d: %w", version, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE config_versions SET active = 1 WHERE version = ?", version); err != nil {
			return fmt.Errorf("store: activate %d: %w", version, err)
		}
		return nil
	})
}
