// Package store is outpostd's on-box database: one SQLite file (pure-Go
// driver modernc.org/sqlite, so CGO_ENABLED=0 builds work) holding the
// configuration history and the registrar's bindings.
//
// # Tables
//
//   - schema_migrations(version, name, applied_at): one row per applied
//     migration. Migrations are the embedded files migrations/NNNN_name.sql,
//     numbered 1..N without gaps; Open applies the missing ones in order,
//     each in its own transaction together with its schema_migrations row.
//     A database that records a migration number this binary does not know
//     (it was written by a newer outpostd) is refused with ErrSchemaTooNew
//     and its contents are not modified; so is one whose migration N has
//     another file name than this binary's (divergent builds). The file is
//     tagged with PRAGMA application_id "OPST"; a foreign SQLite file is
//     refused with ErrNotStore.
//   - config_versions(version, applied_at, source, sha256, active,
//     document): every applied configuration document is a new row,
//     versions start at 1 and are never reused or deleted. Exactly one row
//     is active once any exists; a partial unique index makes the database
//     itself reject a second active row.
//   - bindings(aor, contact_uri, contact, source, local_addr, call_id, cseq,
//     q, expires, registered, user_agent, instance, reg_id), primary key
//     (aor, contact_uri), WITHOUT ROWID.
//
// Tables are STRICT. Times are INTEGER nanoseconds since the Unix epoch
// (the zero time.Time is stored as 0) and are returned in UTC.
//
// # Durability
//
// The appliance runs from flash and loses power without warning, so the
// aim is: after a power cut or kill -9 at any moment, the database opens
// and holds exactly the last committed state — never a half-applied
// configuration, never a binding batch that is partly written.
//
//   - journal_mode=WAL: a commit appends pages to the -wal file and only
//     becomes visible once its commit frame (checksummed) is complete;
//     recovery on the next open discards a torn tail. Readers do not block
//     the writer, so the API can read the active configuration while the
//     registrar flushes bindings. Checkpoints copy WAL pages into the main
//     file and are themselves restartable.
//   - synchronous=FULL: the WAL is fsynced at every commit, so a commit that
//     returned is on stable storage and survives a power cut, not just a
//     process crash. (NORMAL would keep the file consistent but could lose
//     the last commits on power loss; a configuration change the API
//     acknowledged must not silently revert.)
//   - BEGIN IMMEDIATE (_txlock=immediate) for every write transaction: the
//     write lock is taken at BEGIN, so a read-modify-write such as "max
//     version + 1, deactivate the old, insert the new" never fails half-way
//     with SQLITE_BUSY when upgrading a read lock, and concurrent writers
//     (another process such as a CLI) queue behind busy_timeout=5000 instead.
//     Inside the process, writers are additionally serialised by a Go lock
//     that honours the caller's context.
//   - Each API call is one transaction: ApplyConfig, Activate,
//     SaveBindings (all deletes and upserts of a call), DeleteAORBindings,
//     and LoadBindings (which deletes expired rows); each migration is one.
//   - Open pre-creates the database file (0600, so -wal/-shm inherit 0600)
//     and its directory (0700), fsyncs the directory, and checks that
//     journal_mode, synchronous and foreign_keys really took effect.
//
// The crash test (TestCrashDurability) re-executes the test binary as a
// writer and SIGKILLs it at random moments; it checks that every commit the
// writer reported survives, that the history stays contiguous with exactly
// one active version whose document matches its hash, and that binding
// batches are all-or-nothing. kill -9 leaves the OS page cache intact, so
// that test proves atomicity and crash recovery; surviving a real power cut
// additionally relies on synchronous=FULL and on the flash honouring fsync.
//
// SaveBindings is designed for being called every ~200 ms with up to
// thousands of rows: one transaction (hence one fsync) per call, rows sent
// in multi-row INSERT ... ON CONFLICT DO UPDATE statements of 64, 8 and 1
// rows, each prepared once per connection and reused (deletes likewise).
// Calling it with nothing to do costs nothing. Each call that writes costs
// a WAL fsync, which on flash is also wear: callers should only flush dirty
// bindings. Commits use fsync(2); a daemon may opt into
// fdatasync(2) process-wide with modernc.org/sqlite's Fdatasync(true),
// which keeps the same durability but skips the timestamp update fsync
// forces through the file system's journal.
//
// # What it does not do
//
// Documents are opaque bytes: the store never parses, validates or
// normalises them (it only hashes them), and it imports nothing from the
// rest of outpostd. Validation, applying a configuration to the running
// system and deciding what to roll back to belong to the callers. Bindings
// are not validated either, and the store does not expire them on its own:
// only LoadBindings purges expired rows. Nothing is ever pruned from the
// configuration history.
package store
