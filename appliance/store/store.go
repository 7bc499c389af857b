package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver; pure Go, CGO_ENABLED=0 works
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNotFound is returned when a requested config version (or the active
// one) does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrSchemaTooNew is wrapped by the error Open returns when the database has
// a migration recorded that this binary does not know, i.e. it was written
// by a newer outpostd. Its contents are not modified.
var ErrSchemaTooNew = errors.New("store: database schema is newer than this binary")

// ErrNotStore is wrapped by the error Open returns when the file is an SQLite
// database that does not belong to outpostd. Its data is not modified, but
// the DSN may already have switched it to WAL mode.
var ErrNotStore = errors.New("store: file is not an outpost store")

// applicationID is PRAGMA application_id of an outpost store ("OPST"); set by
// migrations/0001_init.sql.
const applicationID = 0x4F505354

// maxOpenConns bounds the connection pool. Writers are serialised by
// Store.wmu, so more than one connection only lets readers (ActiveConfig,
// History, ...) run while a write is in progress, which WAL allows.
const maxOpenConns = 4

// busyOpenTimeout bounds firstConn's retries (the busy_timeout of the DSN).
const busyOpenTimeout = 5 * time.Second

// Store is the appliance's SQLite database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string

	// wmu serialises write transactions inside this process, so they queue
	// in Go (honouring ctx) rather than spinning in SQLite's busy handler.
	// busy_timeout still covers writers in other processes (e.g. a CLI).
	wmu chan struct{}

	now func() time.Time

	// upsertStmts and deleteStmts are SaveBindings' batch statements,
	// cdrStmts AddCDRs', indexed like batchSizes.
	upsertStmts, deleteStmts, cdrStmts batchStmts

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the store at path and brings its schema up
// to date. The parent directory is created with mode 0700 and the database
// file with mode 0600 if they do not exist. A database written by a newer
// binary is refused with an error wrapping ErrSchemaTooNew.
func Open(ctx context.Context, path string) (*Store, error) {
	return openWith(ctx, path, embeddedMigrations())
}

// openWith is Open with an injectable migration source, for tests.
func openWith(ctx context.Context, path string, src fs.FS) (*Store, error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	path = filepath.Clean(path)

	migs, err := loadMigrations(src)
	if err != nil {
		return nil, err
	}
	if err := createFile(path); err != nil {
		return nil, err
	}

	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns)
	db.SetConnMaxIdleTime(5 * time.Minute)

	s := &Store{db: db, path: path, wmu: make(chan struct{}, 1), now: time.Now}
	if err := s.checkPragmas(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(ctx, migs); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.prepareBatchStmts(ctx); err != nil {
		s.closeStmts()
		db.Close()
		return nil, err
	}
	return s, nil
}

// dsn builds the connection string. The path is percent-escaped because the
// "file:" form is parsed as a URI by SQLite ('?' and '#' would otherwise end
// the path, '%' would start an escape).
func dsn(path string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	return "file:" + esc +
		"?_pragma=busy_timeout(5000)" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(FULL)" +
		"&_txlock=immediate"
}

// createFile creates the parent directory (0700) and an empty database file
// (0600) if absent. SQLite gives its -wal and -shm files the mode of the
// database file, so pre-creating it keeps all three private. The directory
// is fsynced after creating the file so the new entry survives a power cut.
func createFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("store: create directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store: create database file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: some file systems refuse to sync directories
		d.Close()
	}
	return nil
}

// checkPragmas verifies that the DSN settings the durability argument rests
// on actually took effect (journal_mode=WAL silently stays "delete" on file
// systems without shared-memory support, for instance).
func (s *Store) checkPragmas(ctx context.Context) error {
	conn, err := s.firstConn(ctx)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	defer conn.Close()
	var mode string
	var syncMode, fk int
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	if !strings.EqualFold(mode, "wal") || syncMode != 2 || fk != 1 {
		return fmt.Errorf("store: open %s: unexpected settings journal_mode=%s synchronous=%d foreign_keys=%d (want wal, 2, 1)",
			s.path, mode, syncMode, fk)
	}
	return nil
}

// firstConn opens the first connection, retrying while the file is busy.
// Opening a WAL database that another process is creating or migrating
// can fail with SQLITE_BUSY before the busy handler is installed (WAL
// recovery and the journal_mode switch do not wait), so two processes
// starting together — the daemon and the CLI, or a test's subprocesses —
// would otherwise fail at random.
func (s *Store) firstConn(ctx context.Context) (*sql.Conn, error) {
	deadline := time.Now().Add(busyOpenTimeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		conn, err := s.db.Conn(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close closes the database. Further calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeStmts()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Path returns the database file path (cleaned).
func (s *Store) Path() string { return s.path }

// lockWrite takes the in-process writer lock, or gives up when ctx is done.
func (s *Store) lockWrite(ctx context.Context) (unlock func(), err error) {
	select {
	case s.wmu <- struct{}{}:
		return func() { <-s.wmu }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// writeTx runs fn in one write transaction. The DSN's _txlock=immediate
// makes BeginTx issue BEGIN IMMEDIATE, so the write lock is taken up front
// and the transaction can never fail half-way with SQLITE_BUSY on upgrade
// from a read lock.
func (s *Store) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	unlock, err := s.lockWrite(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// toNanos/fromNanos store times as INTEGER nanoseconds since the epoch. The
// zero time is stored as 0 and comes back as the zero time.
func toNanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNanosTime):
		return minNanos
	case t.After(maxNanosTime):
		return maxNanos
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

const (
	minNanos = -1 << 63
	maxNanos = 1<<63 - 1
)

var (
	minNanosTime = time.Unix(0, minNanos)
	maxNanosTime = time.Unix(0, maxNanos)
)
