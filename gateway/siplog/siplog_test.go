package siplog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestLogger(level slog.Level, classify Classifier) (*slog.Logger, *Limiter, *bytes.Buffer, *fakeClock) {
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	lim := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}), classify, Options{Now: clock.now})
	return slog.New(lim).With("part", "sipgo"), lim, &buf, clock
}

func lines(b *bytes.Buffer) []string {
	s := strings.TrimSpace(b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// A flood of one kind from one source class gives one line per 10 s, at
// WARN, with the count suppressed since the previous line; every record
// is counted.
func TestOneLinePerKindAndClassPerInterval(t *testing.T) {
	log, lim, buf, clock := newTestLogger(slog.LevelInfo, Sipgo)
	packet := "INVITE sip:x SIP/2.0\r\nVia: \x00\xff" + strings.Repeat("A", 1000)
	for range 1000 {
		log.Error("failed to parse", "data", packet, "error", errors.New("bad header: "+packet))
		clock.advance(time.Millisecond) // 1000 records in 1 s
	}
	got := lines(buf)
	if len(got) != 1 {
		t.Fatalf("%d lines for 1000 records in 1 s, want 1:\n%s", len(got), buf)
	}
	l := got[0]
	for _, want := range []string{"level=WARN", "kind=unparseable", "source_class=unknown", "suppressed=0", "part=sipgo"} {
		if !strings.Contains(l, want) {
			t.Errorf("line lacks %q: %s", want, l)
		}
	}
	if strings.Contains(l, "\x00") || strings.Contains(l, "\xff") || strings.Contains(l, "\r") || strings.Count(l, "A") > 2*DefaultMaxValue {
		t.Errorf("packet data not truncated and escaped: %q", l)
	}
	if !strings.Contains(l, `…(1029 bytes)`) {
		t.Errorf("line does not say how long the cut value was: %s", l)
	}

	clock.advance(10 * time.Second) // the next record opens a new window
	log.Error("failed to parse", "data", "x")
	got = lines(buf)
	if len(got) != 2 || !strings.Contains(got[1], "suppressed=999") {
		t.Fatalf("second line: %q", got)
	}
	if n := lim.Counts()["unparseable"]; n != 1001 {
		t.Fatalf("counted %d, want 1001", n)
	}
}

// Kinds and source classes are limited separately; records that are not
// per-packet pass through untouched.
func TestKindsAndClassesAreSeparate(t *testing.T) {
	log, lim, buf, _ := newTestLogger(slog.LevelInfo, Sipgo)
	for range 3 {
		log.Error("failed to parse", "data", "x")
		log.Error("Server tx failed to handle request", "error", "missing Via", "req", "BYE sip:x SIP/2.0")
		log.Error("Read filter error", "raddr", "203.0.113.9:5060", "error", "e")
		log.Error("Read filter error", "raddr", "192.168.1.20:5060", "error", "e")
		log.Error("Read filter error", "raddr", "127.0.0.1:5060", "error", "e")
		log.Info("sip listening", "listener", "udp:127.0.0.1:5060")
	}
	got := lines(buf)
	if len(got) != 5+3 {
		t.Fatalf("%d lines, want 5 summaries + 3 pass-through:\n%s", len(got), buf)
	}
	for _, want := range []string{"source_class=public", "source_class=private", "source_class=loopback", "kind=bad_request"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if c := lim.Counts(); c["read_filter"] != 9 || c["bad_request"] != 3 || c["unparseable"] != 3 {
		t.Errorf("counts %v", c)
	}
	if strings.Count(buf.String(), `level=INFO msg="sip listening" part=sipgo listener=udp:127.0.0.1:5060`+"\n") != 3 {
		t.Errorf("a record that is not per-packet was changed or dropped:\n%s", buf)
	}
}

// With the log at ERROR, per-packet records are still counted (they are
// logged downgraded to WARN, which is then off); debug stays disabled so
// sipgo does not build debug dumps.
func TestCountedWhenOff(t *testing.T) {
	log, lim, buf, _ := newTestLogger(slog.LevelError, Sipgo)
	log.Error("failed to parse", "data", "x")
	if buf.Len() != 0 {
		t.Errorf("logged at ERROR level: %s", buf)
	}
	if lim.Counts()["unparseable"] != 1 {
		t.Errorf("not counted")
	}
	if log.Enabled(t.Context(), slog.LevelDebug) {
		t.Errorf("debug enabled")
	}
}

// sipgo's INFO records about a request or response nothing handles come
// once per packet: limited like its failures; other INFO records pass.
func TestUnhandledAtInfoIsPerPacket(t *testing.T) {
	log, lim, buf, _ := newTestLogger(slog.LevelInfo, Sipgo)
	for range 100 {
		log.Info("TransactionLayer: Unhandled sip response. Possible retransmissions. Set UnhandledResponseHandler", "caller", "transactionLayer", "msg", "response status=200 reason=OK transport=UDP source=198.51.100.7:5060")
		log.Info("Unhandled sip response", "source", "198.51.100.7:5060", "response", "SIP/2.0 180 Ringing")
		log.Info("Unhandled sip request. OnRequest handler not added", "caller", "transactionLayer", "msg", "request method=BYE")
	}
	log.Info("sip listening", "listener", "udp:127.0.0.1:5060")
	got := lines(buf)
	if len(got) != 4 {
		t.Fatalf("%d lines for 300 unhandled records and one other, want 3 summaries + 1:\n%s", len(got), buf)
	}
	if c := lim.Counts(); c["unmatched_response"] != 200 || c["no_handler"] != 100 {
		t.Errorf("counts %v", c)
	}
}
