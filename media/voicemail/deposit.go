package voicemail

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/outpost/outpost/media/g711"
)

// Caller is who leaves a message.
type Caller struct {
	Number, Name string
}

// Outcome is how a deposit ended.
type Outcome string

const (
	Recorded Outcome = "recorded" // a message was kept
	Empty    Outcome = "empty"    // the caller left nothing worth keeping
	Full     Outcome = "full"     // the mailbox or the box was full: the caller was told
	NoMedia  Outcome = "no-media" // the caller sent no audio
	Failed   Outcome = "failed"   // the box could not record (told "not available")
)

// beep is the tone before the recording: 1 kHz for 0.4 s at about
// -12 dBFS.
var beep = func() []byte {
	out := make([]byte, 3200)
	for i := range out {
		out[i] = g711.LinearToUlaw(int16(8000 * math.Sin(2*math.Pi*1000*float64(i)/sampleRate)))
	}
	return out
}()

// Deposit runs a caller's deposit into mailbox on l: the greeting (the
// mailbox's own, else the shipped one; # skips it), the beep, then the
// recording until the caller hangs up (ctx ends), presses #, falls
// silent, or reaches the maximum length. The message is synced and
// indexed before Deposit returns; one interrupted by a crash is kept up to
// its last sync, at most a second before.
func (s *Service) Deposit(ctx context.Context, l *Line, mailbox string, from Caller) Outcome {
	lim := *s.limits.Load()
	if checkMailbox(mailbox) != nil {
		s.stats.failed.Add(1)
		_, _ = l.play(ctx, prompt("unavailable"), "")
		return Failed
	}
	start := time.Now()
	m := Message{ID: newID(start), Mailbox: mailbox, Caller: from.Number, CallerName: from.Name, Received: start, State: Recording}
	switch err := s.reserve(m.ID, mailbox, lim); {
	case errors.Is(err, errFull):
		s.stats.full.Add(1)
		s.log.Info("voicemail: mailbox full", "mailbox", mailbox)
		_, _ = l.play(ctx, prompt("full"), "")
		return Full
	case err != nil:
		return s.failed(ctx, l, m, err)
	}
	defer s.release(m.ID)
	if _, err := l.play(ctx, s.greeting(mailbox), "#"); err != nil {
		return Empty // hung up during the greeting
	}
	if _, err := l.play(ctx, beep, ""); err != nil {
		return Empty
	}
	if err := os.MkdirAll(filepath.Dir(s.path(m)), 0o750); err != nil {
		return s.failed(ctx, l, m, err)
	}
	w, err := createWAV(s.path(m), int64(lim.MaxMessage/time.Second)*bytesPerSecond)
	if err != nil {
		return s.failed(ctx, l, m, err)
	}
	if err := s.cfg.Index.Put(m); err != nil {
		_ = w.close()
		_ = os.Remove(s.path(m))
		return s.failed(ctx, l, m, err)
	}
	m.Received = time.Now()
	rec := &recorder{w: w, begun: m.Received, lastLoud: m.Received}
	l.record(rec.sink)
	why := s.recordUntil(ctx, l, rec, lim)
	l.record(nil)
	return s.keep(ctx, l, m, rec, why)
}

// Reasons a recording ends.
const (
	endHangUp = iota
	endKey
	endSilence
	endLength
	endNoMedia
	endWrite
)

// recordUntil records until one of the ends above, syncing every second
// and keeping the stream toward the caller alive with silence.
func (s *Service) recordUntil(ctx context.Context, l *Line, rec *recorder, lim Limits) int {
	for {
		d, err := l.silence(ctx, syncEvery, "#")
		if e := rec.sync(); e != nil && rec.err == nil {
			rec.fail(e)
		}
		switch {
		case err != nil:
			return endHangUp
		case d == '#':
			return endKey
		}
		switch done, quietFor, werr := rec.state(); {
		case werr != nil:
			s.log.Warn("voicemail: recording cut short", "err", werr)
			return endWrite
		case done:
			return endLength
		case l.lastAudio().Before(rec.started()) && time.Since(rec.started()) >= lim.NoMedia:
			return endNoMedia
		case lim.Silence > 0 && quietFor >= lim.Silence:
			return endSilence
		}
	}
}

// keep closes the recording and indexes it, or drops it when too short.
func (s *Service) keep(ctx context.Context, l *Line, m Message, rec *recorder, why int) Outcome {
	if why == endSilence {
		rec.trimQuiet()
	}
	n, err := rec.close()
	m.Bytes, m.Duration = n, time.Duration(n)*time.Second/bytesPerSecond
	switch why {
	case endNoMedia:
		s.stats.noMedia.Add(1)
	case endLength:
		s.stats.tooLong.Add(1)
	case endWrite:
		s.stats.diskFull.Add(1)
	}
	if m.Duration < minMessage || (err != nil && n == 0) {
		_ = os.Remove(s.path(m))
		if derr := s.cfg.Index.Delete(m.ID); derr != nil {
			s.log.Error("voicemail: index", "message", m.ID, "err", derr)
		}
		if why == endNoMedia {
			return NoMedia
		}
		s.stats.empty.Add(1)
		return Empty
	}
	m.State = Unheard
	if err := s.cfg.Index.Put(m); err != nil {
		// The file stays with its Recording entry: the next start keeps it.
		s.log.Error("voicemail: index", "message", m.ID, "err", err)
		return Failed
	}
	s.stats.recorded.Add(1)
	s.log.Info("voicemail: message recorded", "mailbox", m.Mailbox, "message", m.ID, "caller", m.Caller, "duration", m.Duration)
	s.changed(m.Mailbox)
	if why != endHangUp {
		_, _ = l.play(ctx, prompt("recorded"), "")
	}
	return Recorded
}

// failed tells the caller voicemail is not available.
func (s *Service) failed(ctx context.Context, l *Line, m Message, err error) Outcome {
	s.stats.failed.Add(1)
	s.log.Error("voicemail: cannot record", "mailbox", m.Mailbox, "err", err)
	_, _ = l.play(ctx, prompt("unavailable"), "")
	return Failed
}

// greeting is the mailbox's recorded greeting, else the shipped one.
func (s *Service) greeting(mailbox string) []byte {
	pcm, err := readWAV(filepath.Join(s.cfg.Dir, mailbox, "greeting.wav"))
	if err != nil || len(pcm) == 0 {
		return prompt("greeting")
	}
	return g711.Encode(nil, pcm, g711.Ulaw)
}

// loud is the mean absolute sample value above which a frame is speech
// (about -45 dBFS): line noise and comfort noise stay under it.
const loud = 180

// recorder writes the caller's audio; sink runs on the line's receive
// goroutine, the rest on the deposit's.
type recorder struct {
	mu       sync.Mutex
	w        *wavWriter
	begun    time.Time // read without mu: never changes
	lastLoud time.Time
	quiet    int64 // PCM bytes since the last loud frame
	full     bool
	err      error
}

func (r *recorder) sink(pcm []int16) {
	var sum int
	for _, v := range pcm {
		sum += abs(int(v))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full || r.err != nil {
		return
	}
	if len(pcm) > 0 && sum/len(pcm) > loud {
		r.lastLoud, r.quiet = time.Now(), 0
	} else {
		r.quiet += int64(2 * len(pcm))
	}
	switch err := r.w.write(pcm); {
	case errors.Is(err, errTooLong):
		r.full = true
	case err != nil:
		r.err = err
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// started is when the recording began (set before the sink runs).
func (r *recorder) started() time.Time { return r.begun }

func (r *recorder) sync() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil
	}
	return r.w.sync()
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// state: the limit reached, how long the caller has been quiet, and a
// write error.
func (r *recorder) state() (bool, time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.full, time.Since(r.lastLoud), r.err
}

// trimQuiet drops the silence that ended the recording.
func (r *recorder) trimQuiet() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = r.w.truncate(r.quiet)
	}
}

// close syncs and closes the file and returns the PCM bytes kept.
func (r *recorder) close() (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.full = true // the sink writes no more
	err := r.w.close()
	return r.w.n, err
}
