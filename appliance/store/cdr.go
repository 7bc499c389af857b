package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// CDR is one call detail record.
type CDR struct {
	ID          int64 // assigned by AddCDRs; ignored on input
	CallID      string
	Started     time.Time
	Answered    time.Time // zero if never answered
	Ended       time.Time
	Caller      string
	Dialled     string // the number as the caller dialled it
	Routed      string // the number after the dial plan
	Route       string // local, hq, pstn
	Target      string // the contact or trunk target that answered or was tried last
	Mode        string // normal, survivable, standalone
	Code        int    // final SIP status given to the caller
	Disposition string
	Hangup      string // caller, callee, system
	Media       string // per-leg media statistics (JSON), "" when not relayed
}

const cdrCols = "call_id, started, answered, ended, caller, dialled, routed, route, target, mode, code, disposition, hangup, media"

const cdrNumCols = 14

func cdrInsertSQL(rows int) string { return insertSQL("cdr", cdrCols, cdrNumCols, rows) }

// AddCDRs appends records in one transaction and then keeps only the newest
// keep rows (keep <= 0: no pruning). Records are durable when it returns.
func (s *Store) AddCDRs(ctx context.Context, recs []CDR, keep int) error {
	if len(recs) == 0 {
		return nil
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		args := make([]any, 0, batchSizes[0]*cdrNumCols)
		if err := execBatched(ctx, tx, &s.cdrStmts, len(recs), &args, func(args []any, i int) []any {
			r := &recs[i]
			return append(args, r.CallID, toNanos(r.Started), toNanos(r.Answered), toNanos(r.Ended),
				r.Caller, r.Dialled, r.Routed, r.Route, r.Target, r.Mode, r.Code, r.Disposition, r.Hangup, r.Media)
		}); err != nil {
			return fmt.Errorf("store: cdr: insert: %w", err)
		}
		if keep > 0 {
			// Ids grow monotonically, so "the newest keep" is an id range:
			// one index range delete, no sort.
			if _, err := tx.ExecContext(ctx, "DELETE FROM cdr WHERE id <= (SELECT max(id) FROM cdr) - ?", keep); err != nil {
				return fmt.Errorf("store: cdr: prune: %w", err)
			}
		}
		return nil
	})
}

// CDRs returns up to limit records of calls started at or after since,
// oldest first (limit <= 0: all).
func (s *Store) CDRs(ctx context.Context, since time.Time, limit int) ([]CDR, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id, "+cdrCols+" FROM cdr WHERE started >= ? ORDER BY started, id LIMIT ?",
		toNanos(since), limit)
	if err != nil {
		return nil, fmt.Errorf("store: cdr: query: %w", err)
	}
	defer rows.Close()
	var out []CDR
	for rows.Next() {
		var r CDR
		var st, an, en int64
		if err := rows.Scan(&r.ID, &r.CallID, &st, &an, &en, &r.Caller, &r.Dialled, &r.Routed, &r.Route,
			&r.Target, &r.Mode, &r.Code, &r.Disposition, &r.Hangup, &r.Media); err != nil {
			return nil, fmt.Errorf("store: cdr: scan: %w", err)
		}
		r.Started, r.Answered, r.Ended = fromNanos(st), fromNanos(an), fromNanos(en)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: cdr: %w", err)
	}
	return out, nil
}
