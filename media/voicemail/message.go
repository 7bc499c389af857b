package voicemail

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// State is where a message is in its life.
type State string

const (
	Recording State = "recording" // being recorded (or interrupted: repaired at start)
	Unheard   State = "new"       // recorded, not heard
	Saved     State = "saved"     // heard, or saved from the phone
)

// Message is one message's index entry.
type Message struct {
	ID         string
	Mailbox    string
	Caller     string // the caller's number as the box saw it ("" unknown)
	CallerName string
	Received   time.Time // when the recording started
	Duration   time.Duration
	Bytes      int64 // PCM bytes in the file
	State      State
	// Delivered is when HQ acknowledged the message (zero: not yet).
	Delivered time.Time
}

// Index is where messages are listed (the appliance's SQLite store). A
// message's file is written and synced before Put records it as New, so
// the index never names audio that is not on disk.
type Index interface {
	// Put inserts or replaces m.
	Put(m Message) error
	// Delete removes message id.
	Delete(id string) error
	// List returns a mailbox's messages, oldest first; mailbox "" lists
	// every mailbox's.
	List(mailbox string) ([]Message, error)
}

// newID is a message id: its start time (sortable, readable in a file
// listing) and 64 random bits.
func newID(t time.Time) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:])
}

// ErrMailbox: a mailbox name that cannot be a directory name.
var ErrMailbox = errors.New("voicemail: invalid mailbox name")

// checkMailbox refuses names that could leave the data directory: a
// mailbox is an extension (digits, letters, + - _ .), never "." or "..".
func checkMailbox(m string) error {
	if m == "" || len(m) > 64 || strings.HasPrefix(m, ".") {
		return ErrMailbox
	}
	for _, c := range m {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '+', c == '-', c == '_', c == '.':
		default:
			return ErrMailbox
		}
	}
	return nil
}
