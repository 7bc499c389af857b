package voicemail

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Limits are what the document sets (the zero value of each: its
// default).
type Limits struct {
	MaxMessage      time.Duration // longest message (default 3 min)
	Silence         time.Duration // silence that ends a recording (default 10 s; negative: never)
	NoMedia         time.Duration // no audio at all from the caller: the call ends (default 10 s)
	MailboxMessages int           // messages a mailbox holds, any state (default 100)
	TotalBytes      int64         // audio the box keeps in all, in bytes (default 256 MiB)
}

const (
	defaultMaxMessage = 3 * time.Minute
	defaultSilence    = 10 * time.Second
	defaultNoMedia    = 10 * time.Second
	defaultMessages   = 100
	defaultTotal      = 256 << 20
	// minMessage: shorter recordings (a caller who hangs up at the beep)
	// are not kept.
	minMessage = 500 * time.Millisecond
	// syncEvery bounds what a power cut loses of a recording.
	syncEvery = time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxMessage <= 0 {
		l.MaxMessage = defaultMaxMessage
	}
	if l.Silence == 0 {
		l.Silence = defaultSilence
	}
	if l.NoMedia <= 0 {
		l.NoMedia = defaultNoMedia
	}
	if l.MailboxMessages <= 0 {
		l.MailboxMessages = defaultMessages
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = defaultTotal
	}
	return l
}

// Config is the service's set-up; Limits may change later (SetLimits).
type Config struct {
	Dir   string // messages: Dir/<mailbox>/<id>.wav
	Index Index
	PINs  PINStore // nil: no PIN can be set, no mailbox opened by PIN
	// OnChange is called (not under a lock of the service) when a
	// mailbox's count of new or saved messages changed: for MWI.
	OnChange func(mailbox string)
	Log      *slog.Logger
}

// Service is the box's voicemail: the mailboxes and the lines answering
// calls into them.
type Service struct {
	cfg    Config
	log    *slog.Logger
	limits atomic.Pointer[Limits]
	stats  counters
	pins   pinLimiter

	mu        sync.Mutex
	recording map[string]int64  // bytes reserved by recordings in progress, by id
	counts    map[string][2]int // new and saved messages by mailbox, from the index (Waiting)
}

// counters are the service's statistics.
type counters struct {
	recorded, empty, full, diskFull, failed   atomic.Uint64
	noMedia, tooLong, garbageDTMF, badPackets atomic.Uint64
	recovered, wrongPIN, pinLocked            atomic.Uint64
}

// Stats are the counters as numbers.
type Stats struct {
	Recorded    uint64 // messages kept
	Empty       uint64 // recordings too short to keep
	Full        uint64 // callers told the mailbox (or the box) is full
	DiskFull    uint64 // recordings cut short by a write error
	Failed      uint64 // deposits that could not start (file, index)
	NoMedia     uint64 // calls ended because the caller sent no audio
	TooLong     uint64 // recordings stopped at the maximum length
	GarbageDTMF uint64 // events with no key, and digits dropped in a flood
	BadPackets  uint64 // datagrams that were not the line's RTP
	Recovered   uint64 // interrupted recordings repaired at start
	WrongPIN    uint64 // wrong PINs (or unknown mailboxes) at retrieval
	PINLocked   uint64 // retrievals refused: too many wrong PINs
}

// New opens the service over cfg.Dir and the index. Recordings a crash
// interrupted are repaired and kept (or dropped when too short), so a
// message is never lost nor half-indexed.
func New(cfg Config, limits Limits) (*Service, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, log: cfg.Log, recording: map[string]int64{}}
	s.SetLimits(limits)
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("voicemail: %w", err)
	}
	all, err := cfg.Index.List("")
	if err != nil {
		return nil, fmt.Errorf("voicemail: reading the index: %w", err)
	}
	for _, m := range all {
		if m.State == Recording {
			s.recover(m)
		}
	}
	if all, err = cfg.Index.List(""); err != nil {
		return nil, fmt.Errorf("voicemail: reading the index: %w", err)
	}
	s.counts = tally(all)
	return s, nil
}

// SetLimits replaces the limits (a push); recordings in progress keep
// theirs.
func (s *Service) SetLimits(l Limits) {
	l = l.withDefaults()
	s.limits.Store(&l)
}

func (s *Service) path(m Message) string {
	return filepath.Join(s.cfg.Dir, m.Mailbox, m.ID+".wav")
}

// recover keeps what an interrupted recording wrote.
func (s *Service) recover(m Message) {
	n, err := repairWAV(s.path(m))
	if err != nil || time.Duration(n)*time.Second/bytesPerSecond < minMessage {
		s.log.Warn("voicemail: interrupted recording dropped", "message", m.ID, "mailbox", m.Mailbox, "bytes", n, "err", err)
		_ = os.Remove(s.path(m))
		if err := s.cfg.Index.Delete(m.ID); err != nil {
			s.log.Error("voicemail: index", "message", m.ID, "err", err)
		}
		return
	}
	m.State, m.Bytes, m.Duration = Unheard, n, time.Duration(n)*time.Second/bytesPerSecond
	if err := s.cfg.Index.Put(m); err != nil {
		s.log.Error("voicemail: index", "message", m.ID, "err", err)
		return
	}
	s.stats.recovered.Add(1)
	s.log.Info("voicemail: interrupted recording kept", "message", m.ID, "mailbox", m.Mailbox, "duration", m.Duration)
}

// Open answers offer from local with a new line (see open).
func (s *Service) Open(local netip.Addr, offer []byte) (*Line, []byte, error) {
	return open(local, offer, &s.stats)
}

// Waiting returns a mailbox's count of new and of saved messages. It
// reads no file nor the index (phones' registrations ask it).
func (s *Service) Waiting(mailbox string) (newMsgs, oldMsgs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts[mailbox]
	return c[0], c[1]
}

// recount reads a mailbox's counts from the index, after a change.
func (s *Service) recount(mailbox string) {
	ms, err := s.cfg.Index.List(mailbox)
	if err != nil {
		s.log.Error("voicemail: reading a mailbox", "mailbox", mailbox, "err", err)
		return
	}
	s.mu.Lock()
	s.counts[mailbox] = tally(ms)[mailbox]
	s.mu.Unlock()
}

// tally counts new and saved messages by mailbox.
func tally(ms []Message) map[string][2]int {
	out := map[string][2]int{}
	for _, m := range ms {
		c := out[m.Mailbox]
		switch m.State {
		case Unheard:
			c[0]++
		case Saved:
			c[1]++
		}
		out[m.Mailbox] = c
	}
	return out
}

// Messages lists a mailbox's kept messages, oldest first.
func (s *Service) Messages(mailbox string) ([]Message, error) {
	ms, err := s.cfg.Index.List(mailbox)
	out := ms[:0]
	for _, m := range ms {
		if m.State != Recording {
			out = append(out, m)
		}
	}
	return out, err
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	c := &s.stats
	return Stats{Recorded: c.recorded.Load(), Empty: c.empty.Load(), Full: c.full.Load(), DiskFull: c.diskFull.Load(),
		Failed: c.failed.Load(), NoMedia: c.noMedia.Load(), TooLong: c.tooLong.Load(), GarbageDTMF: c.garbageDTMF.Load(),
		BadPackets: c.badPackets.Load(), Recovered: c.recovered.Load(), WrongPIN: c.wrongPIN.Load(), PINLocked: c.pinLocked.Load()}
}

func (s *Service) changed(mailbox string) {
	s.recount(mailbox)
	if s.cfg.OnChange != nil {
		s.cfg.OnChange(mailbox)
	}
}

// errFull: the mailbox or the box holds all it may.
var errFull = errors.New("voicemail: full")

// reserve checks the quotas for a new recording in mailbox and reserves
// its maximum size against the total.
func (s *Service) reserve(id, mailbox string, l Limits) error {
	all, err := s.cfg.Index.List("")
	if err != nil {
		return err
	}
	var total int64
	inBox := 0
	for _, m := range all {
		total += m.Bytes
		if m.Mailbox == mailbox {
			inBox++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recording {
		total += r
	}
	maxBytes := int64(l.MaxMessage/time.Second) * bytesPerSecond
	if inBox >= l.MailboxMessages || total+maxBytes > l.TotalBytes {
		return errFull
	}
	s.recording[id] = maxBytes
	return nil
}

func (s *Service) release(id string) {
	s.mu.Lock()
	delete(s.recording, id)
	s.mu.Unlock()
}
