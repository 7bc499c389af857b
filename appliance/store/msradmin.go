package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SetMSRInactive records that the operator took the MSR name out of media
// selection on this box (inactive true) or put it back (false).
func (s *Store) SetMSRInactive(ctx context.Context, name string, inactive bool, now time.Time) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		if inactive {
			_, err = tx.ExecContext(ctx, "INSERT INTO msr_inactive (msr, since) VALUES (?, ?) ON CONFLICT (msr) DO NOTHING", name, toNanos(now))
		} else {
			_, err = tx.ExecContext(ctx, "DELETE FROM msr_inactive WHERE msr = ?", name)
		}
		if err != nil {
			return fmt.Errorf("store: set MSR %q inactive=%t: %w", name, inactive, err)
		}
		return nil
	})
}

// InactiveMSRs returns the MSRs the operator took out of selection, by name.
func (s *Store) InactiveMSRs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT msr FROM msr_inactive ORDER BY msr")
	if err != nil {
		return nil, fmt.Errorf("store: read inactive MSRs: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("store: read inactive MSRs: %w", err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read inactive MSRs: %w", err)
	}
	return out, nil
}
