package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// VoicemailMessage is one row of the voicemail index (see
// migrations/0006_voicemail.sql).
type VoicemailMessage struct {
	ID, Mailbox        string
	Caller, CallerName string
	Received           time.Time
	Duration           time.Duration
	Bytes              int64
	State              string // "recording", "new", "saved"
	Delivered          time.Time
}

// PutVoicemail inserts or replaces a message's row.
func (s *Store) PutVoicemail(ctx context.Context, m VoicemailMessage) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO voicemail (id, mailbox, caller, caller_name, received, duration_ms, bytes, state, delivered_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET mailbox = excluded.mailbox, caller = excluded.caller, caller_name = excluded.caller_name,
				received = excluded.received, duration_ms = excluded.duration_ms, bytes = excluded.bytes, state = excluded.state,
				delivered_at = excluded.delivered_at`,
			m.ID, m.Mailbox, m.Caller, m.CallerName, toNanos(m.Received), m.Duration.Milliseconds(), m.Bytes, m.State, toNanos(m.Delivered))
		if err != nil {
			return fmt.Errorf("store: put voicemail %s: %w", m.ID, err)
		}
		return nil
	})
}

// DeleteVoicemail removes a message's row.
func (s *Store) DeleteVoicemail(ctx context.Context, id string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM voicemail WHERE id = ?", id); err != nil {
			return fmt.Errorf("store: delete voicemail %s: %w", id, err)
		}
		return nil
	})
}

// Voicemail lists a mailbox's messages, oldest first ("" = every
// mailbox).
func (s *Store) Voicemail(ctx context.Context, mailbox string) ([]VoicemailMessage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, mailbox, caller, caller_name, received, duration_ms, bytes, state, delivered_at
		FROM voicemail WHERE ? = '' OR mailbox = ? ORDER BY received, id`, mailbox, mailbox)
	if err != nil {
		return nil, fmt.Errorf("store: read voicemail: %w", err)
	}
	defer rows.Close()
	var out []VoicemailMessage
	for rows.Next() {
		var m VoicemailMessage
		var received, delivered, ms int64
		if err := rows.Scan(&m.ID, &m.Mailbox, &m.Caller, &m.CallerName, &received, &ms, &m.Bytes, &m.State, &delivered); err != nil {
			return nil, fmt.Errorf("store: read voicemail: %w", err)
		}
		m.Received, m.Duration, m.Delivered = fromNanos(received), time.Duration(ms)*time.Millisecond, fromNanos(delivered)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read voicemail: %w", err)
	}
	return out, nil
}

// VoicemailPIN returns a mailbox's PIN hash ("" = none set).
func (s *Store) VoicemailPIN(ctx context.Context, mailbox string) (string, error) {
	var h string
	err := s.db.QueryRowContext(ctx, "SELECT hash FROM voicemail_pins WHERE mailbox = ?", mailbox).Scan(&h)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("store: read the PIN of %s: %w", mailbox, err)
	}
	return h, nil
}

// SetVoicemailPIN stores a mailbox's PIN hash.
func (s *Store) SetVoicemailPIN(ctx context.Context, mailbox, hash string) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO voicemail_pins (mailbox, hash, set_at) VALUES (?, ?, ?)
			ON CONFLICT (mailbox) DO UPDATE SET hash = excluded.hash, set_at = excluded.set_at`, mailbox, hash, toNanos(time.Now()))
		if err != nil {
			return fmt.Errorf("store: set the PIN of %s: %w", mailbox, err)
		}
		return nil
	})
}
