package voicemail

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func newService(t testing.TB, lim Limits) (*Service, *memIndex, chan string) {
	t.Helper()
	idx := newMemIndex()
	changed := make(chan string, 8)
	s, err := New(Config{Dir: t.TempDir(), Index: idx, OnChange: func(m string) { changed <- m }}, lim)
	if err != nil {
		t.Fatal(err)
	}
	return s, idx, changed
}

func TestDepositRecordsTheCaller(t *testing.T) {
	s, idx, changed := newService(t, Limits{})
	l, c := dial(t, s)
	out := make(chan Outcome, 1)
	go func() { out <- s.Deposit(context.Background(), l, "1001", Caller{Number: "+15550100", Name: "Bob"}) }()
	c.key(11) // # skips the greeting
	c.waitRecording()
	c.tone(440, 3*time.Second)
	c.key(11) // # ends the message
	if o := <-out; o != Recorded {
		t.Fatalf("outcome %s", o)
	}
	if m := <-changed; m != "1001" {
		t.Fatalf("changed %q", m)
	}
	ms, _ := idx.List("1001")
	if len(ms) != 1 || ms[0].State != Unheard || ms[0].Caller != "+15550100" || ms[0].CallerName != "Bob" {
		t.Fatalf("index: %+v", ms)
	}
	pcm, err := readWAV(s.path(ms[0]))
	if err != nil {
		t.Fatal(err)
	}
	got := time.Duration(len(pcm)) * time.Second / sampleRate
	if got < 2700*time.Millisecond || got > 3500*time.Millisecond {
		t.Fatalf("recorded %v of a 3 s tone", got)
	}
	if f := frequency(pcm); f < 430 || f > 450 {
		t.Fatalf("recorded %.0f Hz, sent 440", f)
	}
	if ms[0].Duration != got || ms[0].Bytes != int64(2*len(pcm)) {
		t.Fatalf("index says %v / %d bytes, file has %v", ms[0].Duration, ms[0].Bytes, got)
	}
	if n, o := s.Waiting("1001"); n != 1 || o != 0 {
		t.Fatalf("waiting %d/%d", n, o)
	}
}

func TestDepositEndsOnSilenceAndTrimsIt(t *testing.T) {
	s, idx, _ := newService(t, Limits{Silence: 1500 * time.Millisecond})
	l, c := dial(t, s)
	out := make(chan Outcome, 1)
	go func() { out <- s.Deposit(context.Background(), l, "1001", Caller{}) }()
	c.key(11)
	c.waitRecording()
	c.tone(440, 2*time.Second)
	c.tone(0, 3*time.Second) // digital silence: the line ends the message
	if o := <-out; o != Recorded {
		t.Fatalf("outcome %s", o)
	}
	ms, _ := idx.List("1001")
	if len(ms) != 1 || ms[0].Duration > 2500*time.Millisecond || ms[0].Duration < 1500*time.Millisecond {
		t.Fatalf("index: %+v", ms)
	}
}

func TestDepositStopsAtTheMaximumLength(t *testing.T) {
	s, idx, _ := newService(t, Limits{MaxMessage: 2 * time.Second})
	l, c := dial(t, s)
	out := make(chan Outcome, 1)
	go func() { out <- s.Deposit(context.Background(), l, "1001", Caller{}) }()
	c.key(11)
	c.waitRecording()
	c.tone(440, 4*time.Second)
	if o := <-out; o != Recorded {
		t.Fatalf("outcome %s", o)
	}
	ms, _ := idx.List("1001")
	if len(ms) != 1 || ms[0].Duration != 2*time.Second || s.Stats().TooLong != 1 {
		t.Fatalf("index: %+v, stats %+v", ms, s.Stats())
	}
}

func TestDepositWithoutMediaEnds(t *testing.T) {
	s, idx, _ := newService(t, Limits{NoMedia: time.Second})
	l, c := dial(t, s)
	out := make(chan Outcome, 1)
	go func() { out <- s.Deposit(context.Background(), l, "1001", Caller{}) }()
	c.key(11)
	if o := <-out; o != NoMedia {
		t.Fatalf("outcome %s", o)
	}
	if ms, _ := idx.List(""); len(ms) != 0 || s.Stats().NoMedia != 1 {
		t.Fatalf("index %+v stats %+v", ms, s.Stats())
	}
	if files, _ := filepath.Glob(filepath.Join(s.cfg.Dir, "1001", "*.wav")); len(files) != 0 {
		t.Fatalf("files left: %v", files)
	}
}

func TestDepositHangUpKeepsTheMessage(t *testing.T) {
	s, idx, _ := newService(t, Limits{})
	l, c := dial(t, s)
	ctx, hangUp := context.WithCancel(context.Background())
	out := make(chan Outcome, 1)
	go func() { out <- s.Deposit(ctx, l, "1001", Caller{}) }()
	c.key(11)
	c.waitRecording()
	c.tone(440, 2*time.Second)
	hangUp()
	if o := <-out; o != Recorded {
		t.Fatalf("outcome %s", o)
	}
	if ms, _ := idx.List("1001"); len(ms) != 1 || ms[0].State != Unheard {
		t.Fatalf("index %+v", ms)
	}
}

func TestFullMailboxIsToldAndCounted(t *testing.T) {
	s, idx, _ := newService(t, Limits{MailboxMessages: 1})
	_ = idx.Put(Message{ID: "old", Mailbox: "1001", State: Saved, Bytes: 100})
	l, _ := dial(t, s)
	if o := s.Deposit(context.Background(), l, "1001", Caller{}); o != Full || s.Stats().Full != 1 {
		t.Fatalf("outcome %s stats %+v", o, s.Stats())
	}
	// The total quota: 1 MiB cannot hold a 3-minute message.
	s2, _, _ := newService(t, Limits{TotalBytes: 1 << 20})
	l2, _ := dial(t, s2)
	if o := s2.Deposit(context.Background(), l2, "1001", Caller{}); o != Full {
		t.Fatalf("outcome %s", o)
	}
}

func TestConcurrentDepositsRespectTheTotal(t *testing.T) {
	// Room for one 10 s message: of two callers at once, one is refused.
	s, _, _ := newService(t, Limits{MaxMessage: 10 * time.Second, TotalBytes: 15 * bytesPerSecond})
	var wg sync.WaitGroup
	outs := make(chan Outcome, 2)
	ctx, cancel := context.WithCancel(context.Background())
	for range 2 {
		l, c := dial(t, s)
		wg.Add(1)
		go func() { defer wg.Done(); outs <- s.Deposit(ctx, l, "1001", Caller{}) }()
		c.key(11)
	}
	if o := <-outs; o != Full {
		t.Fatalf("first outcome %s", o)
	}
	cancel()
	wg.Wait()
}

func TestInterruptedRecordingIsRepairedAtStart(t *testing.T) {
	dir, idx := t.TempDir(), newMemIndex()
	m := Message{ID: newID(time.Now()), Mailbox: "1001", Received: time.Now(), State: Recording}
	_ = idx.Put(m)
	short := Message{ID: newID(time.Now()), Mailbox: "1001", Received: time.Now(), State: Recording}
	_ = idx.Put(short)
	if err := os.MkdirAll(filepath.Join(dir, "1001"), 0o750); err != nil {
		t.Fatal(err)
	}
	// A crash after 2 s were written and 1 s synced: the header says 1 s,
	// the file holds 2 s and half a sample.
	w, err := createWAV(filepath.Join(dir, "1001", m.ID+".wav"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.write(make([]int16, sampleRate))
	_ = w.sync()
	_ = w.write(make([]int16, sampleRate))
	_ = w.buf.Flush()
	_, _ = w.f.Write([]byte{1})
	_ = w.f.Close()
	if err := os.WriteFile(filepath.Join(dir, "1001", short.ID+".wav"), []byte("RIFF"), 0o640); err != nil {
		t.Fatal(err)
	}

	s, err := New(Config{Dir: dir, Index: idx}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := idx.List("1001")
	if len(ms) != 1 || ms[0].ID != m.ID || ms[0].State != Unheard || ms[0].Duration != 2*time.Second {
		t.Fatalf("index after start: %+v", ms)
	}
	pcm, err := readWAV(s.path(ms[0]))
	if err != nil || len(pcm) != 2*sampleRate {
		t.Fatalf("repaired file: %d samples, %v", len(pcm), err)
	}
	if _, err := os.Stat(s.path(short)); !os.IsNotExist(err) {
		t.Fatalf("the empty recording's file stays: %v", err)
	}
	if s.Stats().Recovered != 1 {
		t.Fatalf("stats %+v", s.Stats())
	}
}

func TestMailboxNamesStayInTheDirectory(t *testing.T) {
	for _, m := range []string{"", ".", "..", "../x", "a/b", ".hidden", "1001\x00"} {
		if checkMailbox(m) == nil {
			t.Errorf("mailbox %q accepted", m)
		}
	}
	for _, m := range []string{"1001", "+15550100", "sales_team"} {
		if err := checkMailbox(m); err != nil {
			t.Errorf("mailbox %q: %v", m, err)
		}
	}
}

func TestPromptsAreShipped(t *testing.T) {
	for _, name := range []string{"greeting", "recorded", "full", "unavailable"} {
		if len(prompt(name)) < 1600 {
			t.Errorf("prompt %s: %d samples", name, len(prompt(name)))
		}
	}
}
