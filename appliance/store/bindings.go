package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Binding is one registrar binding, persisted so a restart keeps phones
// reachable. Its key is (AOR, ContactURI).
type Binding struct {
	AOR        string
	ContactURI string
	Contact    string // full Contact header value as received, params included
	Source     string // "udp:1.2.3.4:5060" where the REGISTER came from
	Local      string // "udp:127.0.0.1:5060" listener it arrived on
	CallID     string
	CSeq       uint32
	Q          float64 // -1 = none
	Expires    time.Time
	Registered time.Time
	UserAgent  string
	Instance   string // +sip.instance
	RegID      int
}

// Key returns the binding's key.
func (b Binding) Key() BindingKey { return BindingKey{AOR: b.AOR, ContactURI: b.ContactURI} }

// BindingKey identifies a binding.
type BindingKey struct {
	AOR, ContactURI string
}

const bindingCols = "aor, contact_uri, contact, source, local_addr, call_id, cseq, q, expires, registered, user_agent, instance, reg_id"

const bindingNumCols = 13

// batchSizes are the statement sizes, in rows, SaveBindings splits its work
// into, largest first: n rows become n/64 statements of 64 rows, then at
// most 7 of 8, then at most 7 single-row ones. Multi-row statements cut the
// per-statement cost (driver argument conversion, context watcher, VDBE
// setup); a fixed set of sizes lets each be prepared once per connection
// instead of parsing a fresh remainder statement on every call. 64 rows of
// 13 columns are 832 parameters, far below SQLite's limit of 32766.
var batchSizes = [...]int{64, 8, 1}

type batchStmts [len(batchSizes)]*sql.Stmt

// insertSQL is an INSERT of rows rows of cols columns into table.
func insertSQL(table, colNames string, cols, rows int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	return "INSERT INTO " + table + " (" + colNames + ") VALUES " + strings.TrimSuffix(strings.Repeat(row+",", rows), ",")
}

func upsertSQL(rows int) string {
	return insertSQL("bindings", bindingCols, bindingNumCols, rows) + ` ON CONFLICT (aor, contact_uri) DO UPDATE SET
		contact = excluded.contact, source = excluded.source, local_addr = excluded.local_addr,
		call_id = excluded.call_id, cseq = excluded.cseq, q = excluded.q, expires = excluded.expires,
		registered = excluded.registered, user_agent = excluded.user_agent, instance = excluded.instance,
		reg_id = excluded.reg_id`
}

// deleteSQL deletes the given number of keys; SQLite searches the primary
// key once per key (see TestDeleteUsesPrimaryKey).
func deleteSQL(rows int) string {
	return "DELETE FROM bindings WHERE (aor, contact_uri) IN (VALUES " +
		strings.TrimSuffix(strings.Repeat("(?,?),", rows), ",") + ")"
}

// prepareBatchStmts prepares the batch statements on the DB; transactions
// use them through Tx.StmtContext, which reuses the statement already
// prepared on the transaction's connection.
func (s *Store) prepareBatchStmts(ctx context.Context) error {
	for i, n := range batchSizes {
		for _, p := range []struct {
			stmts *batchStmts
			sql   string
		}{{&s.upsertStmts, upsertSQL(n)}, {&s.deleteStmts, deleteSQL(n)}, {&s.cdrStmts, cdrInsertSQL(n)}} {
			var err error
			if p.stmts[i], err = s.db.PrepareContext(ctx, p.sql); err != nil {
				return fmt.Errorf("store: prepare: %w", err)
			}
		}
	}
	return nil
}

func (s *Store) closeStmts() {
	for _, st := range append(append(s.upsertStmts[:], s.deleteStmts[:]...), s.cdrStmts[:]...) {
		if st != nil {
			st.Close()
		}
	}
}

func appendBindingArgs(args []any, b *Binding) []any {
	return append(args, b.AOR, b.ContactURI, b.Contact, b.Source, b.Local, b.CallID,
		int64(b.CSeq), b.Q, toNanos(b.Expires), toNanos(b.Registered), b.UserAgent, b.Instance, int64(b.RegID))
}

// SaveBindings applies deletes and then upserts in ONE transaction: either
// all of it is on disk after it returns nil, or none of it. Upserts insert
// or replace the binding with the same key. A key that appears in both
// slices ends up present (deletes run first); a key repeated in upserts ends
// up with the last value. Calling it with nothing to do does not touch the
// database (no transaction, no fsync).
func (s *Store) SaveBindings(ctx context.Context, upserts []Binding, deletes []BindingKey) error {
	if len(upserts) == 0 && len(deletes) == 0 {
		return nil
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		args := make([]any, 0, batchSizes[0]*bindingNumCols)
		if err := execBatched(ctx, tx, &s.deleteStmts, len(deletes), &args, func(args []any, i int) []any {
			return append(args, deletes[i].AOR, deletes[i].ContactURI)
		}); err != nil {
			return fmt.Errorf("store: delete bindings: %w", err)
		}
		if err := execBatched(ctx, tx, &s.upsertStmts, len(upserts), &args, func(args []any, i int) []any {
			return appendBindingArgs(args, &upserts[i])
		}); err != nil {
			return fmt.Errorf("store: save bindings: %w", err)
		}
		return nil
	})
}

// execBatched executes rows 0..n-1 with the batch statements, largest first.
// add appends row i's arguments; args is scratch space.
func execBatched(ctx context.Context, tx *sql.Tx, stmts *batchStmts, n int, args *[]any, add func(args []any, i int) []any) error {
	row := 0
	for k, size := range batchSizes {
		var st *sql.Stmt
		for n-row >= size {
			if st == nil {
				st = tx.StmtContext(ctx, stmts[k])
				defer st.Close()
			}
			a := (*args)[:0]
			for i := row; i < row+size; i++ {
				a = add(a, i)
			}
			*args = a
			if _, err := st.ExecContext(ctx, a...); err != nil {
				return err
			}
			row += size
		}
	}
	return nil
}

// LoadBindings deletes bindings that expired at or before now and returns
// the rest, ordered by AOR and contact URI. Times come back in UTC.
func (s *Store) LoadBindings(ctx context.Context, now time.Time) ([]Binding, error) {
	out := []Binding{}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		cutoff := toNanos(now)
		if _, err := tx.ExecContext(ctx, "DELETE FROM bindings WHERE expires <= ?", cutoff); err != nil {
			return fmt.Errorf("store: load bindings: %w", err)
		}
		rows, err := tx.QueryContext(ctx, "SELECT "+bindingCols+" FROM bindings WHERE expires > ? ORDER BY aor, contact_uri", cutoff)
		if err != nil {
			return fmt.Errorf("store: load bindings: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var b Binding
			var cseq, expires, registered, regID int64
			if err := rows.Scan(&b.AOR, &b.ContactURI, &b.Contact, &b.Source, &b.Local, &b.CallID,
				&cseq, &b.Q, &expires, &registered, &b.UserAgent, &b.Instance, &regID); err != nil {
				return fmt.Errorf("store: load bindings: %w", err)
			}
			b.CSeq = uint32(cseq)
			b.RegID = int(regID)
			b.Expires = fromNanos(expires)
			b.Registered = fromNanos(registered)
			out = append(out, b)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store: load bindings: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteAORBindings deletes every binding of aor (none is not an error).
func (s *Store) DeleteAORBindings(ctx context.Context, aor string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM bindings WHERE aor = ?", aor); err != nil {
			return fmt.Errorf("store: delete bindings of %q: %w", aor, err)
		}
		return nil
	})
}
