package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// ServiceSetting is one setting a user made from the phone: Feature is
// the gateway's name of it ("dnd", "forward_busy"...), Value what was
// set, Base the document's value it was set over.
type ServiceSetting struct {
	Extension, Feature string
	Value, Base        string
	Set                time.Time
}

// SetService stores a phone's setting, replacing the user's last one of
// that feature.
func (s *Store) SetService(ctx context.Context, v ServiceSetting) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO user_services (extension, feature, value, base, set_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (extension, feature) DO UPDATE SET value = excluded.value, base = excluded.base, set_at = excluded.set_at`,
			v.Extension, v.Feature, v.Value, v.Base, toNanos(v.Set))
		if err != nil {
			return fmt.Errorf("store: set %s of %s: %w", v.Feature, v.Extension, err)
		}
		return nil
	})
}

// Services returns every stored setting, by extension and feature.
func (s *Store) Services(ctx context.Context) ([]ServiceSetting, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT extension, feature, value, base, set_at FROM user_services ORDER BY extension, feature")
	if err != nil {
		return nil, fmt.Errorf("store: read user services: %w", err)
	}
	defer rows.Close()
	var out []ServiceSetting
	for rows.Next() {
		var v ServiceSetting
		var at int64
		if err := rows.Scan(&v.Extension, &v.Feature, &v.Value, &v.Base, &at); err != nil {
			return nil, fmt.Errorf("store: read user services: %w", err)
		}
		v.Set = fromNanos(at)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read user services: %w", err)
	}
	return out, nil
}
