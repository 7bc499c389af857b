package voicemail

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pion/rtp"

	"github.com/outpost/outpost/media/g711"
)

type memPINs struct {
	mu sync.Mutex
	m  map[string]string
}

func (p *memPINs) PIN(mb string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[mb], nil
}

func (p *memPINs) SetPIN(mb, h string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[mb] = h
	return nil
}

// putMessage stores a message of d of a tone at f Hz, as a deposit
// would.
func putMessage(t *testing.T, s *Service, mailbox, caller string, f float64, d time.Duration) Message {
	t.Helper()
	m := Message{ID: newID(time.Now()), Mailbox: mailbox, Caller: caller, Received: time.Now(), State: Unheard}
	if err := os.MkdirAll(filepath.Join(s.cfg.Dir, mailbox), 0o750); err != nil {
		t.Fatal(err)
	}
	w, err := createWAV(s.path(m), 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	pcm := make([]int16, int(d.Seconds()*sampleRate))
	for i := range pcm {
		pcm[i] = int16(8000 * math.Sin(2*math.Pi*f*float64(i)/sampleRate))
	}
	if err := w.write(pcm); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	m.Bytes, m.Duration = int64(2*len(pcm)), d
	if err := s.cfg.Index.Put(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// hear reads what the line plays until a pure tone at want has been
// heard for d without a break (speech is neither pure nor steady), or
// fails after within.
func (c *caller) hear(want float64, d, within time.Duration) {
	c.t.Helper()
	buf := make([]byte, 1500)
	_ = c.conn.SetReadDeadline(time.Now().Add(within))
	defer c.conn.SetReadDeadline(time.Time{})
	var heard time.Duration
	for heard < d {
		n, _, err := c.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			c.t.Fatalf("heard %v of %.0f Hz, want %v: %v", heard, want, d, err)
		}
		var p rtp.Packet
		if p.Unmarshal(buf[:n]) != nil {
			continue
		}
		pcm := g711.Decode(nil, p.Payload, g711.Ulaw)
		if purity(pcm, want) > 0.9 && level(pcm) > 2000 {
			heard += 20 * time.Millisecond
		} else {
			heard = 0
		}
	}
}

// TestRetrieveOwnMailbox: the menu's 1 plays the new message (the test
// hears its tone), # goes on and keeps it as heard (saved), * hangs up.
func TestRetrieveOwnMailbox(t *testing.T) {
	s, idx, changed := newService(t, Limits{})
	m := putMessage(t, s, "1001", "1002", 440, 2*time.Second)
	l, c := dial(t, s)
	done := make(chan struct{})
	go func() { s.Retrieve(context.Background(), l, "1001"); close(done) }()
	c.key(1) // during the count (type-ahead): hear the messages
	c.hear(440, time.Second, 30*time.Second)
	c.key(11) // next
	if got := recvChanged(t, changed); got != "1001" {
		t.Fatalf("changed %q", got)
	}
	c.key(10) // * at the main menu
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the menu did not end on *")
	}
	ms, _ := idx.List("1001")
	if len(ms) != 1 || ms[0].ID != m.ID || ms[0].State != Saved {
		t.Fatalf("after hearing it: %+v", ms)
	}
}

// TestRetrieveDeletes: 7 during the message deletes it, file and index.
func TestRetrieveDeletes(t *testing.T) {
	s, idx, changed := newService(t, Limits{})
	m := putMessage(t, s, "1001", "", 440, 5*time.Second)
	l, c := dial(t, s)
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	go s.Retrieve(ctx, l, "1001")
	c.key(1)
	c.hear(440, 200*time.Millisecond, 30*time.Second)
	c.key(7)
	if got := recvChanged(t, changed); got != "1001" {
		t.Fatalf("changed %q", got)
	}
	if ms, _ := idx.List("1001"); len(ms) != 0 {
		t.Fatalf("7 did not delete the message: %+v", ms)
	}
	if _, err := os.Stat(s.path(m)); !os.IsNotExist(err) {
		t.Fatalf("the message's file stays: %v", err)
	}
}

func TestPINHashes(t *testing.T) {
	h, err := hashPIN("4711")
	if err != nil {
		t.Fatal(err)
	}
	if !checkPIN(h, "4711") || checkPIN(h, "4712") || checkPIN(h, "") || checkPIN("4711", "4711") {
		t.Fatal("PIN check")
	}
	if h2, _ := hashPIN("4711"); h2 == h {
		t.Fatal("two hashes of a PIN are the same: no salt")
	}
}

func TestPINLockout(t *testing.T) {
	var p pinLimiter
	now := time.Now()
	for i := range pinFailures {
		if p.locked("1001", now) {
			t.Fatalf("locked after %d failures", i)
		}
		p.failed("1001", now)
	}
	if !p.locked("1001", now) || p.locked("1002", now) {
		t.Fatal("lockout is not per mailbox")
	}
	if p.locked("1001", now.Add(pinWindow+time.Second)) {
		t.Fatal("the lockout does not end")
	}
}

// TestRetrieveAnyWithPIN: a wrong PIN is refused and counted, the right
// one opens the mailbox.
func TestRetrieveAnyWithPIN(t *testing.T) {
	pins := &memPINs{}
	h, _ := hashPIN("2468")
	_ = pins.SetPIN("1001", h)
	idx := newMemIndex()
	s, err := New(Config{Dir: t.TempDir(), Index: idx, PINs: pins}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	putMessage(t, s, "1001", "", 440, 2*time.Second)
	l, c := dial(t, s)
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	go s.RetrieveAny(ctx, l)
	digits := func(ds ...byte) {
		for _, d := range ds {
			c.key(d)
		}
	}
	digits(1, 0, 0, 1, 11, 1, 1, 1, 1, 11) // mailbox 1001, PIN 1111
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().WrongPIN != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no wrong PIN counted: %+v", s.Stats())
		}
		time.Sleep(10 * time.Millisecond) // the counter has no event to wait on
	}
	digits(1, 0, 0, 1, 11, 2, 4, 6, 8, 11, 1) // then 1 at the menu
	c.hear(440, time.Second, 40*time.Second)
}

func recvChanged(t *testing.T, changed <-chan string) string {
	t.Helper()
	select {
	case m := <-changed:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no mailbox change")
		return ""
	}
}
