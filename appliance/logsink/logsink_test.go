package logsink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/pki"
)

// msg is a parsed RFC 5424 message.
type msg struct {
	pri                          int
	ts, host, app, procid, msgid string
	sd                           map[string]map[string]string // SD-ID -> name -> value
	text                         string
	sdOrder                      []string
}

// parse5424 is a strict little RFC 5424 §6 parser: the header fields, the
// SD-ELEMENTs with their escapes, and MSG without its BOM.
func parse5424(s string) (m msg, err error) {
	fail := func(f string, a ...any) (msg, error) { return msg{}, fmt.Errorf("%q: "+f, append([]any{s}, a...)...) }
	if !strings.HasPrefix(s, "<") {
		return fail("no PRI")
	}
	end := strings.Index(s, ">")
	if end < 2 || end > 4 {
		return fail("bad PRI")
	}
	if m.pri, err = strconv.Atoi(s[1:end]); err != nil || m.pri > 191 {
		return fail("bad PRI")
	}
	rest, ok := strings.CutPrefix(s[end+1:], "1 ")
	if !ok {
		return fail("VERSION is not 1")
	}
	f := strings.SplitN(rest, " ", 6)
	if len(f) < 6 {
		return fail("short header")
	}
	m.ts, m.host, m.app, m.procid, m.msgid = f[0], f[1], f[2], f[3], f[4]
	for i, max := range []int{0, 255, 48, 128, 32} {
		for _, c := range []byte(f[i]) {
			if c < 33 || c > 126 {
				return fail("header field %d has %q", i, c)
			}
		}
		if i > 0 && len(f[i]) > max {
			return fail("header field %d too long", i)
		}
	}
	if m.ts != "-" {
		if _, err := time.Parse(time.RFC3339Nano, m.ts); err != nil {
			return fail("TIMESTAMP: %v", err)
		}
	}
	sd := f[5]
	m.sd = map[string]map[string]string{}
	if strings.HasPrefix(sd, "-") {
		sd = sd[1:]
	} else {
		for strings.HasPrefix(sd, "[") {
			sd = sd[1:]
			i := strings.IndexAny(sd, " ]")
			if i < 1 {
				return fail("SD-ID")
			}
			id := sd[:i]
			if _, dup := m.sd[id]; dup {
				return fail("SD-ID %s twice", id)
			}
			m.sd[id] = map[string]string{}
			m.sdOrder = append(m.sdOrder, id)
			sd = sd[i:]
			for strings.HasPrefix(sd, " ") {
				eq := strings.Index(sd, `="`)
				if eq < 2 || eq > 33 {
					return fail("SD-NAME")
				}
				name := sd[1:eq]
				if strings.ContainsAny(name, ` ="]`) {
					return fail("SD-NAME %q", name)
				}
				sd = sd[eq+2:]
				var v strings.Builder
				for {
					if sd == "" {
						return fail("unterminated PARAM-VALUE")
					}
					c := sd[0]
					sd = sd[1:]
					if c == '"' {
						break
					}
					if c == ']' {
						return fail("unescaped ]")
					}
					if c == '\\' && sd != "" && strings.IndexByte(`"\]`, sd[0]) >= 0 {
						c, sd = sd[0], sd[1:]
					}
					v.WriteByte(c)
				}
				m.sd[id][name] = v.String()
			}
			if !strings.HasPrefix(sd, "]") {
				return fail("SD-ELEMENT not closed")
			}
			sd = sd[1:]
		}
	}
	if sd != "" {
		if sd[0] != ' ' {
			return fail("no SP before MSG")
		}
		m.text = strings.TrimPrefix(sd[1:], "\xEF\xBB\xBF")
	}
	return m, nil
}

var testHeader = Header{Facility: Local0, Hostname: "box-1", AppName: "outpostd", ProcID: "42"}

func TestFormat(t *testing.T) {
	ts := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name string
		r    Record
		want string
	}{
		{"plain", Record{Time: ts, Level: slog.LevelInfo, Message: "started"},
			`<134>1 2026-11-29T09:00:00.123456Z box-1 outpostd 42 - - started`},
		{"attrs and msgid", Record{Time: ts, Level: slog.LevelError, MsgID: "registrar",
			Params: []Param{{"part", "registrar"}, {"err", `bad "x" \ y]`}}, Message: "failed"},
			`<131>1 2026-11-29T09:00:00.123456Z box-1 outpostd 42 registrar [outpost@32473 part="registrar" err="bad \"x\" \\ y\]"] failed`},
		{"names cleaned", Record{Time: ts, Level: slog.LevelWarn, Params: []Param{{`a b=c"d]`, "v"}, {strings.Repeat("n", 40), ""}}},
			`<132>1 2026-11-29T09:00:00.123456Z box-1 outpostd 42 - [outpost@32473 a_b_c_d_="v" ` + strings.Repeat("n", 32) + `=""]`},
		{"utf-8 gets a BOM", Record{Level: slog.LevelDebug, Message: "Grüße"},
			"<135>1 - box-1 outpostd 42 - - \xEF\xBB\xBFGrüße"},
	} {
		got, _ := Append(nil, &testHeader, &tc.r)
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
		if _, err := parse5424(string(got)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestSeverity(t *testing.T) {
	for l, want := range map[slog.Level]int{slog.LevelDebug: 7, slog.LevelInfo: 6, slog.LevelInfo + 2: 5,
		slog.LevelWarn: 4, slog.LevelError: 3, slog.LevelError + 4: 3, slog.LevelDebug - 4: 7} {
		if got := Severity(l); got != want {
			t.Errorf("Severity(%v) = %d, want %d", l, got, want)
		}
	}
}

// FuzzFormat: whatever the attribute and message, the result parses and
// gives the value back (as valid UTF-8).
func FuzzFormat(f *testing.F) {
	f.Add("err", `a"b\c]d`, "msg")
	f.Add("k=]", "\\", "")
	f.Add("", "\xff]\"", "\xfe")
	f.Fuzz(func(t *testing.T, name, value, text string) {
		r := Record{Level: slog.LevelInfo, MsgID: name, Params: []Param{{name, value}}, Message: text}
		b, _ := Append(nil, &testHeader, &r)
		m, err := parse5424(string(b))
		if err != nil {
			t.Fatal(err)
		}
		ps := m.sd[SDID]
		if len(ps) != 1 {
			t.Fatalf("%d params", len(ps))
		}
		for _, v := range ps {
			if want := strings.ToValidUTF8(value, "\uFFFD"); v != want {
				t.Fatalf("value %q came back as %q", want, v)
			}
		}
	})
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]string{
		"udp://198.18.0.9":       "udp 198.18.0.9:514",
		"tcp://logs.hq:601":      "tcp logs.hq:601",
		"tls://[2001:db8::1]":    "tls [2001:db8::1]:6514",
		"tls://logs.hq:6514/":    "tls logs.hq:6514",
		"http://logs.hq":         "error",
		"udp://":                 "error",
		"tcp://logs.hq/path":     "error",
		"198.18.0.9:514":         "error",
		"udp://user@logs.hq:514": "error",
	} {
		n, a, err := ParseTarget(in)
		got := n + " " + a
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("ParseTarget(%q) = %q (%v), want %q", in, got, err, want)
		}
	}
}

// startSink runs a sink for cfg until the test ends and returns a logger
// over it and a console buffer.
func startSink(t *testing.T, cfg Config) (*slog.Logger, *Sink, func()) {
	t.Helper()
	cfg.Header = testHeader
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 10 * time.Millisecond
		cfg.MaxBackoff = 50 * time.Millisecond
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	console := slog.NewTextHandler(io.Discard, nil)
	return slog.New(NewHandler(console, s, slog.LevelInfo)), s, stop
}

// tcpCollector accepts connections on l and sends each octet-counted
// frame it reads to the channel. stop closes the listener and every
// connection: the collector is gone.
func tcpCollector(t *testing.T, l net.Listener) (ch <-chan string, stop func()) {
	t.Helper()
	out := make(chan string, 4096)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	stop = sync.OnceFunc(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	t.Cleanup(stop)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					n, err := br.ReadString(' ')
					if err != nil {
						return
					}
					size, err := strconv.Atoi(strings.TrimSuffix(n, " "))
					if err != nil {
						t.Errorf("MSG-LEN %q: %v", n, err)
						return
					}
					b := make([]byte, size)
					if _, err := io.ReadFull(br, b); err != nil {
						return
					}
					out <- string(b)
				}
			})
		}
	})
	return out, stop
}

func receive(t *testing.T, ch <-chan string) msg {
	t.Helper()
	select {
	case s := <-ch:
		m, err := parse5424(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message at the collector")
	}
	return msg{}
}

func TestUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ch := make(chan string, 16)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			ch <- string(buf[:n])
		}
	}()
	var console bytes.Buffer
	s, err := New(Config{Network: "udp", Address: pc.LocalAddr().String(), Header: testHeader})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	log := slog.New(NewHandler(slog.NewTextHandler(&console, nil), s, slog.LevelInfo))

	log.With("part", "registrar").WithGroup("peer").Info("registered", "addr", "192.0.2.1:5060", "ua", `Phone "X" [1.0]`)
	log.Debug("not sent") // below the level: neither console nor syslog
	log.Warn("plain")
	m := receive(t, ch)
	if m.pri != 16*8+6 || m.host != "box-1" || m.app != "outpostd" || m.procid != "42" || m.msgid != "registrar" || m.text != "registered" {
		t.Errorf("header: %+v", m)
	}
	want := map[string]string{"part": "registrar", "peer.addr": "192.0.2.1:5060", "peer.ua": `Phone "X" [1.0]`}
	if fmt.Sprint(m.sd[SDID]) != fmt.Sprint(want) {
		t.Errorf("SD %v, want %v", m.sd, want)
	}
	if m := receive(t, ch); m.pri != 16*8+4 || m.text != "plain" || len(m.sd) != 0 || m.msgid != "-" {
		t.Errorf("second message: %+v", m)
	}
	if c := console.String(); !strings.Contains(c, "registered") || !strings.Contains(c, "plain") || strings.Contains(c, "not sent") {
		t.Errorf("console got %q", c)
	}
}

// TestTCPReconnect: messages arrive octet-counted; after the collector
// restarts, the sink reconnects and the messages go on.
func TestTCPReconnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	ch, stopCollector := tcpCollector(t, l)
	log, _, _ := startSink(t, Config{Network: "tcp", Address: addr})
	for i := range 3 {
		log.Info("hello\nworld", "i", i)
	}
	for i := range 3 {
		if m := receive(t, ch); m.text != "hello\nworld" || m.sd[SDID]["i"] != strconv.Itoa(i) {
			t.Errorf("message %d: %+v", i, m)
		}
	}

	// The collector goes away (listener and connection) and comes back
	// on the same address.
	stopCollector()
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	ch2, _ := tcpCollector(t, l2)
	// Log until a message arrives: the sink notices the hang-up and
	// reconnects after its backoff.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for n := 0; ; n++ {
		select {
		case s := <-ch2:
			m, err := parse5424(s)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(m.text, "after restart") {
				t.Errorf("got %+v", m)
			}
			return
		case <-tick.C:
			log.Info(fmt.Sprintf("after restart %d", n))
		case <-deadline:
			t.Fatal("no message after the collector restarted")
		}
	}
}

// TestDeadCollector: with nobody listening, logging does not wait; the
// lost messages are counted and the first delivered message says how
// many.
func TestDeadCollector(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // connection refused from now on
	log, s, _ := startSink(t, Config{Network: "tcp", Address: addr, QueueLen: 8})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5000 {
			log.Info("into the void", "i", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("logging blocked on a dead collector")
	}
	if s.Lost() < 5000-8-1 {
		t.Errorf("lost %d, want nearly all of 5000", s.Lost())
	}

	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	ch, _ := tcpCollector(t, l2)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case raw := <-ch:
			m, err := parse5424(raw)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.Atoi(m.sd[dropSDID]["count"])
			if n < 5000-8-1 {
				t.Errorf("first delivered message reports %d drops: %s", n, raw)
			}
			if len(m.sdOrder) == 0 || m.sdOrder[0] != dropSDID {
				t.Errorf("drop report: %s", raw)
			}
			return
		case <-tick.C:
			log.Info("back")
		case <-deadline:
			t.Fatal("nothing delivered after the collector came up")
		}
	}
}

// TestFlushOnStop: what is queued when main stops the sink is written,
// and a dead collector cannot hold the exit longer than FlushTimeout.
func TestFlushOnStop(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := tcpCollector(t, l)
	log, _, stop := startSink(t, Config{Network: "tcp", Address: l.Addr().String()})
	for i := range 100 {
		log.Info("bye", "i", i)
	}
	stop()
	for i := range 100 {
		if m := receive(t, ch); m.sd[SDID]["i"] != strconv.Itoa(i) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}

	// Nobody listens: the flush gives up after FlushTimeout.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	log, _, stop = startSink(t, Config{Network: "tcp", Address: dead.Addr().String(),
		MinBackoff: 50 * time.Millisecond, FlushTimeout: 300 * time.Millisecond})
	log.Info("nobody hears this")
	start := time.Now()
	stop()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stop took %s with a dead collector", d)
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	if err := pki.InitCA(dir, "syslog test CA", 1); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := pki.Issue(dir, dir, "collector", pki.Server, []string{"127.0.0.1"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := tcpCollector(t, l)
	cfg, err := TLSConfig(filepath.Join(dir, pki.CACertFile), l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	log, _, _ := startSink(t, Config{Network: "tls", Address: l.Addr().String(), TLS: cfg})
	log.Error("over TLS", "err", errors.New("x]y"))
	if m := receive(t, ch); m.text != "over TLS" || m.pri != 16*8+3 || m.sd[SDID]["err"] != "x]y" {
		t.Errorf("got %+v", m)
	}

	// A collector whose certificate our CA did not sign gets nothing.
	other := t.TempDir()
	if err := pki.InitCA(other, "other CA", 1); err != nil {
		t.Fatal(err)
	}
	wrong, err := TLSConfig(filepath.Join(other, pki.CACertFile), l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	log, s, stop := startSink(t, Config{Network: "tls", Address: l.Addr().String(), TLS: wrong, FlushTimeout: 200 * time.Millisecond})
	log.Info("must not arrive")
	stop()
	if s.Lost() != 1 {
		t.Errorf("lost %d, want 1", s.Lost())
	}
	select {
	case m := <-ch:
		t.Errorf("an unverified collector got %q", m)
	default:
	}
}
