package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// OfflineMessage is an instant message kept for a user with no phone
// registered.
type OfflineMessage struct {
	ID          int64
	Addressee   string // the local user it is for
	Sender      string // the local user who sent it
	Display     string // the sender's display name
	ContentType string
	Body        []byte
	Received    time.Time
}

// ErrMailboxFull refuses a message beyond the per-user or total bound.
var ErrMailboxFull = errors.New("store: offline messages full")

// KeepMessage stores m unless the addressee already has perUser messages
// or the box total ones (ErrMailboxFull); the ID is set on return.
func (s *Store) KeepMessage(ctx context.Context, m *OfflineMessage, perUser, total int) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		var mine, all int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(addressee = ?), 0) FROM offline_messages", m.Addressee).Scan(&all, &mine); err != nil {
			return fmt.Errorf("store: count offline messages: %w", err)
		}
		if mine >= perUser || all >= total {
			return ErrMailboxFull
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO offline_messages (addressee, sender, display, content_type, body, received) VALUES (?, ?, ?, ?, ?, ?)",
			m.Addressee, m.Sender, m.Display, m.ContentType, m.Body, toNanos(m.Received))
		if err != nil {
			return fmt.Errorf("store: keep message for %s: %w", m.Addressee, err)
		}
		m.ID, err = res.LastInsertId()
		return err
	})
}

// PendingMessages returns addressee's messages, oldest first.
func (s *Store) PendingMessages(ctx context.Context, addressee string) ([]OfflineMessage, error) {
	return s.messages(ctx, "WHERE addressee = ?", addressee)
}

// AllPendingMessages returns every kept message, oldest first.
func (s *Store) AllPendingMessages(ctx context.Context) ([]OfflineMessage, error) {
	return s.messages(ctx, "")
}

func (s *Store) messages(ctx context.Context, where string, args ...any) ([]OfflineMessage, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, addressee, sender, display, content_type, body, received FROM offline_messages "+where+" ORDER BY id", args...)
	if err != nil {
		return nil, fmt.Errorf("store: read offline messages: %w", err)
	}
	defer rows.Close()
	var out []OfflineMessage
	for rows.Next() {
		var m OfflineMessage
		var at int64
		if err := rows.Scan(&m.ID, &m.Addressee, &m.Sender, &m.Display, &m.ContentType, &m.Body, &at); err != nil {
			return nil, fmt.Errorf("store: read offline messages: %w", err)
		}
		m.Received = fromNanos(at)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read offline messages: %w", err)
	}
	return out, nil
}

// DeleteMessage forgets a delivered (or expired) message.
func (s *Store) DeleteMessage(ctx context.Context, id int64) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM offline_messages WHERE id = ?", id); err != nil {
			return fmt.Errorf("store: delete offline message %d: %w", id, err)
		}
		return nil
	})
}

// PruneMessages forgets the messages received before cutoff and says how
// many.
func (s *Store) PruneMessages(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM offline_messages WHERE received < ?", toNanos(cutoff))
		if err != nil {
			return fmt.Errorf("store: prune offline messages: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
