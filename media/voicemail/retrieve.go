package voicemail

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outpost/outpost/media/g711"
)

// Retrieval from the phone. A user's own mailbox (Retrieve) needs no PIN:
// the call came authenticated by SIP digest. Any mailbox (RetrieveAny)
// takes the mailbox number and its PIN; a mailbox without a PIN set
// cannot be opened that way, and a wrong PIN and an unknown mailbox get
// the same answer (no enumeration). Wrong PINs are limited per mailbox
// like digest failures: pinFailures in pinWindow lock it for pinWindow.
//
// The menu: 1 hear the messages (new first, oldest first), 3 record the
// greeting, 5 set the PIN, * hang up. While a message plays or after it:
// 1 again, 7 delete, 9 save, # next; a message heard to its end is saved
// (no longer new).

// PINStore keeps the mailboxes' PINs, hashed (the appliance's store).
type PINStore interface {
	PIN(mailbox string) (hash string, err error) // "" = none set
	SetPIN(mailbox, hash string) error
}

const (
	pinFailures   = 5
	pinWindow     = 15 * time.Minute
	digitWait     = 6 * time.Second
	menuRounds    = 3
	greetingMax   = 60 * time.Second
	pinMin        = 4
	pinMax        = 10
	pinIterations = 100000
)

// pinLimiter counts wrong PINs per mailbox.
type pinLimiter struct {
	mu   sync.Mutex
	fail map[string][]time.Time
}

func (p *pinLimiter) locked(mailbox string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.recent(mailbox, now)) >= pinFailures
}

func (p *pinLimiter) failed(mailbox string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail == nil {
		p.fail = map[string][]time.Time{}
	}
	p.fail[mailbox] = append(p.recent(mailbox, now), now)
}

// recent drops failures older than the window. Called with p.mu held.
func (p *pinLimiter) recent(mailbox string, now time.Time) []time.Time {
	l := p.fail[mailbox]
	i := 0
	for i < len(l) && now.Sub(l[i]) > pinWindow {
		i++
	}
	l = l[i:]
	if len(l) == 0 {
		delete(p.fail, mailbox)
	} else {
		p.fail[mailbox] = l
	}
	return l
}

// hashPIN is "pbkdf2-sha256$iterations$salt$key", base64 without padding.
func hashPIN(pin string) (string, error) {
	var salt [16]byte
	_, _ = rand.Read(salt[:])
	key, err := pbkdf2.Key(sha256.New, pin, salt[:], pinIterations, 32)
	if err != nil {
		return "", err
	}
	enc := base64.RawStdEncoding.EncodeToString
	return "pbkdf2-sha256$" + strconv.Itoa(pinIterations) + "$" + enc(salt[:]) + "$" + enc(key), nil
}

func checkPIN(hash, pin string) bool {
	f := strings.Split(hash, "$")
	if len(f) != 4 || f[0] != "pbkdf2-sha256" {
		return false
	}
	iter, err := strconv.Atoi(f[1])
	salt, e1 := base64.RawStdEncoding.DecodeString(f[2])
	want, e2 := base64.RawStdEncoding.DecodeString(f[3])
	if err != nil || e1 != nil || e2 != nil || iter < 1 || iter > 10*pinIterations {
		return false
	}
	got, err := pbkdf2.Key(sha256.New, pin, salt, iter, len(want))
	return err == nil && subtle.ConstantTimeCompare(got, want) == 1
}

// Retrieve runs the menu of the caller's own mailbox.
func (s *Service) Retrieve(ctx context.Context, l *Line, mailbox string) {
	if checkMailbox(mailbox) != nil {
		_, _ = l.play(ctx, prompt("unavailable"), "")
		return
	}
	s.menu(ctx, l, mailbox)
}

// RetrieveAny asks for a mailbox and its PIN, then runs its menu.
func (s *Service) RetrieveAny(ctx context.Context, l *Line) {
	for range menuRounds {
		box, ok := s.readDigits(ctx, l, "enter-box", 32)
		if !ok {
			return
		}
		if s.pins.locked(box, time.Now()) {
			s.stats.pinLocked.Add(1)
			_, _ = l.play(ctx, prompt("locked"), "")
			return
		}
		pin, ok := s.readDigits(ctx, l, "enter-pin", pinMax)
		if !ok {
			return
		}
		hash := ""
		if s.cfg.PINs != nil && checkMailbox(box) == nil {
			var err error
			if hash, err = s.cfg.PINs.PIN(box); err != nil {
				s.log.Error("voicemail: reading a PIN", "mailbox", box, "err", err)
			}
		}
		if hash == "" || !checkPIN(hash, pin) {
			s.stats.wrongPIN.Add(1)
			s.pins.failed(box, time.Now())
			s.log.Info("voicemail: wrong PIN", "mailbox", box)
			if err := l.playThrough(ctx, prompt("wrong-pin")); err != nil {
				return
			}
			continue
		}
		s.menu(ctx, l, box)
		return
	}
	_, _ = l.play(ctx, prompt("goodbye"), "")
}

// readDigits plays the prompt name and reads digits up to # (or max of
// them); ok is false when the caller hung up or pressed nothing.
func (s *Service) readDigits(ctx context.Context, l *Line, name string, max int) (string, bool) {
	const keys = "0123456789#*"
	d, err := l.play(ctx, prompt(name), keys)
	if err == nil && d == 0 {
		d, err = l.waitDigit(ctx, digitWait, keys)
	}
	var b strings.Builder
	for err == nil && d != 0 {
		switch {
		case d == '#':
			return b.String(), true
		case d >= '0' && d <= '9':
			b.WriteByte(d)
			if b.Len() >= max {
				return b.String(), true
			}
		}
		d, err = l.waitDigit(ctx, digitWait, keys)
	}
	return b.String(), err == nil && b.Len() > 0 // the digits typed before a pause
}

// menu is a mailbox's main menu. Its keys work from the first prompt on
// (type-ahead).
func (s *Service) menu(ctx context.Context, l *Line, mailbox string) {
	const keys = "135*"
	d, ok := s.announce(ctx, l, mailbox, keys)
	if !ok {
		return
	}
	for idle := 0; idle < menuRounds; {
		var err error
		if d == 0 {
			d, err = l.play(ctx, prompt("main-menu"), keys)
		}
		if err == nil && d == 0 {
			d, err = l.waitDigit(ctx, digitWait, keys)
		}
		key := d
		d = 0
		switch {
		case err != nil:
			return
		case key == '1':
			if !s.playMessages(ctx, l, mailbox) {
				return
			}
		case key == '3':
			if !s.recordGreeting(ctx, l, mailbox) {
				return
			}
		case key == '5':
			if !s.setPIN(ctx, l, mailbox) {
				return
			}
		case key == '*':
			_, _ = l.play(ctx, prompt("goodbye"), "")
			return
		default:
			idle++
			continue
		}
		idle = 0
	}
	_, _ = l.play(ctx, prompt("goodbye"), "")
}

// announce says how many new and saved messages there are; a key of
// stopOn cuts it short and is returned.
func (s *Service) announce(ctx context.Context, l *Line, mailbox, stopOn string) (byte, bool) {
	n, o := s.Waiting(mailbox)
	seq := [][]byte{prompt("no-messages")}
	if n > 0 || o > 0 {
		seq = append([][]byte{prompt("you-have")}, number(n)...)
		seq = append(seq, prompt(plural(n, "new-message", "new-messages")))
	}
	if o > 0 {
		seq = append(seq, number(o)...)
		seq = append(seq, prompt(plural(o, "old-message", "old-messages")))
	}
	return s.say(ctx, l, seq, stopOn)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// number is n read digit by digit.
func number(n int) [][]byte {
	var out [][]byte
	for _, c := range strconv.Itoa(n) {
		out = append(out, prompt(string(c)))
	}
	return out
}

// say plays prompts in a row; a digit of stopOn ends it and is
// returned. ok is false when the caller hung up.
func (s *Service) say(ctx context.Context, l *Line, seq [][]byte, stopOn string) (byte, bool) {
	for _, p := range seq {
		if d, err := l.play(ctx, p, stopOn); err != nil || d != 0 {
			return d, err == nil
		}
	}
	return 0, true
}

// playMessages plays each message with its menu. It returns false when
// the caller hung up.
func (s *Service) playMessages(ctx context.Context, l *Line, mailbox string) bool {
	ms, err := s.Messages(mailbox)
	if err != nil {
		s.log.Error("voicemail: reading a mailbox", "mailbox", mailbox, "err", err)
	}
	// New messages first, each kind oldest first (the index's order).
	var order []Message
	for _, st := range []State{Unheard, Saved} {
		for _, m := range ms {
			if m.State == st {
				order = append(order, m)
			}
		}
	}
	for i := 0; i < len(order); i++ {
		m := order[i]
		d, ok := s.playOne(ctx, l, i+1, m)
		if !ok {
			return false
		}
		switch d {
		case '1':
			i-- // again
		case '7':
			s.delete(m)
			if err := l.playThrough(ctx, prompt("deleted")); err != nil {
				return false
			}
		default: // 9, # or nothing: heard, kept
			s.markSaved(m)
			if d == '9' {
				if err := l.playThrough(ctx, prompt("saved")); err != nil {
					return false
				}
			}
		}
	}
	return l.playThrough(ctx, prompt("no-more")) == nil
}

// playOne plays message number n (its header: "message n from X received
// at HH MM", then the audio, then the menu) and returns the key pressed.
func (s *Service) playOne(ctx context.Context, l *Line, n int, m Message) (byte, bool) {
	const keys = "179#"
	seq := append([][]byte{prompt("message")}, number(n)...)
	seq = append(seq, prompt("from"))
	if m.Caller != "" && strings.Trim(m.Caller, "+0123456789") == "" {
		for _, c := range strings.TrimPrefix(m.Caller, "+") {
			seq = append(seq, prompt(string(c)))
		}
	} else {
		seq = append(seq, prompt("unknown"))
	}
	at := m.Received.Local()
	seq = append(seq, prompt("received"))
	for _, c := range at.Format("1504") {
		seq = append(seq, prompt(string(c)))
	}
	for _, p := range seq {
		if d, err := l.play(ctx, p, keys); err != nil || d != 0 {
			return d, err == nil
		}
	}
	pcm, err := readWAV(s.path(m))
	if err != nil {
		s.log.Error("voicemail: reading a message", "message", m.ID, "err", err)
	}
	for _, p := range [][]byte{g711.Encode(nil, pcm, g711.Ulaw), prompt("menu")} {
		if d, err := l.play(ctx, p, keys); err != nil || d != 0 {
			return d, err == nil
		}
	}
	d, err := l.waitDigit(ctx, digitWait, keys)
	return d, err == nil
}

func (s *Service) delete(m Message) {
	if err := s.cfg.Index.Delete(m.ID); err != nil {
		s.log.Error("voicemail: index", "message", m.ID, "err", err)
		return
	}
	if err := os.Remove(s.path(m)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("voicemail: removing a message", "message", m.ID, "err", err)
	}
	s.log.Info("voicemail: message deleted from the phone", "mailbox", m.Mailbox, "message", m.ID)
	s.changed(m.Mailbox)
}

func (s *Service) markSaved(m Message) {
	if m.State == Saved {
		return
	}
	m.State = Saved
	if err := s.cfg.Index.Put(m); err != nil {
		s.log.Error("voicemail: index", "message", m.ID, "err", err)
		return
	}
	s.changed(m.Mailbox)
}

// recordGreeting records the mailbox's greeting: written beside the old
// one, synced and renamed over it, so a hang-up or a crash keeps the old.
func (s *Service) recordGreeting(ctx context.Context, l *Line, mailbox string) bool {
	if _, err := l.play(ctx, prompt("record-greet"), ""); err != nil {
		return false
	}
	if _, err := l.play(ctx, beep, ""); err != nil {
		return false
	}
	dir := filepath.Join(s.cfg.Dir, mailbox)
	tmp := filepath.Join(dir, "greeting.wav.tmp")
	_ = os.Remove(tmp)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		s.log.Error("voicemail: greeting", "mailbox", mailbox, "err", err)
		return true
	}
	w, err := createWAV(tmp, int64(greetingMax/time.Second)*bytesPerSecond)
	if err != nil {
		s.log.Error("voicemail: greeting", "mailbox", mailbox, "err", err)
		return true
	}
	rec := &recorder{w: w, begun: time.Now(), lastLoud: time.Now()}
	l.record(rec.sink)
	why := s.recordUntil(ctx, l, rec, Limits{Silence: 5 * time.Second, NoMedia: 10 * time.Second})
	l.record(nil)
	if why == endSilence {
		rec.trimQuiet()
	}
	n, err := rec.close()
	if why == endHangUp || why == endNoMedia || err != nil || time.Duration(n)*time.Second/bytesPerSecond < minMessage {
		_ = os.Remove(tmp)
		return why != endHangUp
	}
	if err := os.Rename(tmp, filepath.Join(dir, "greeting.wav")); err != nil {
		s.log.Error("voicemail: greeting", "mailbox", mailbox, "err", err)
		return true
	}
	syncDir(dir)
	s.log.Info("voicemail: greeting recorded", "mailbox", mailbox)
	_, err = l.play(ctx, prompt("greet-saved"), "")
	return err == nil
}

// setPIN takes a new PIN of pinMin to pinMax digits, twice the same.
func (s *Service) setPIN(ctx context.Context, l *Line, mailbox string) bool {
	if s.cfg.PINs == nil {
		return true
	}
	pin, ok := s.readDigits(ctx, l, "new-pin", pinMax+1)
	if !ok {
		return ctx.Err() == nil
	}
	if len(pin) < pinMin || len(pin) > pinMax {
		_, err := l.play(ctx, prompt("bad-pin"), "")
		return err == nil
	}
	hash, err := hashPIN(pin)
	if err == nil {
		err = s.cfg.PINs.SetPIN(mailbox, hash)
	}
	if err != nil {
		s.log.Error("voicemail: storing a PIN", "mailbox", mailbox, "err", err)
		_, err := l.play(ctx, prompt("unavailable"), "")
		return err == nil
	}
	s.log.Info("voicemail: PIN set from the phone", "mailbox", mailbox)
	_, err = l.play(ctx, prompt("pin-saved"), "")
	return err == nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}
