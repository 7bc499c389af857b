package msr

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startControl listens on 127.0.0.1 with the default limits, allowing
// 127.0.0.1 (the source of an unbound dial); opts adjust the parameters.
func startControl(t *testing.T, keepAlive time.Duration, opts ...func(*controlParams)) *controlServer {
	t.Helper()
	return startControlAllow(t, keepAlive, newControlAllow(nil, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}), nil, opts...)
}

func startControlAllow(t *testing.T, keepAlive time.Duration, allow *controlAllow, log *slog.Logger, opts ...func(*controlParams)) *controlServer {
	t.Helper()
	p := defaultControlParams(keepAlive, DefaultControlSyncTimeout, false)
	for _, o := range opts {
		o(&p)
	}
	s, err := listenControl(t.Context(), &net.ListenConfig{}, netip.MustParseAddrPort("127.0.0.1:0"), p, allow, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

type cfwClient struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialControl(t *testing.T, s *controlServer) *cfwClient {
	t.Helper()
	return dialFrom(t, s.addr, "")
}

// dialFrom connects to addr from the loopback address src ("" = the
// kernel's choice, 127.0.0.1): Linux answers the whole of 127/8, so a
// test can play several sources.
func dialFrom(t *testing.T, addr netip.AddrPort, src string) *cfwClient {
	t.Helper()
	var d net.Dialer
	if src != "" {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(src), 0))
	}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Bound every read of the test: a missing answer fails, never hangs.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return &cfwClient{t: t, c: c, r: bufio.NewReader(c)}
}

// do sends a request and returns the answer, which must carry its id.
func (c *cfwClient) do(f Frame) *Frame {
	c.t.Helper()
	if _, err := c.c.Write(f.Marshal()); err != nil {
		c.t.Fatal(err)
	}
	res, err := ReadFrame(c.r)
	if err != nil {
		c.t.Fatalf("%s %s: %v", f.Method, f.TransID, err)
	}
	if res.TransID != f.TransID || res.Method != "" {
		c.t.Fatalf("answer %+v to %+v", res, f)
	}
	return res
}

// closed waits for the server to close the connection.
func (c *cfwClient) closed() {
	c.t.Helper()
	if err := c.closeErr(); err != nil {
		c.t.Fatal(err)
	}
}

// closeErr reads until the server closes the connection and says what
// came instead, if anything.
func (c *cfwClient) closeErr() error {
	f, err := ReadFrame(c.r)
	if err != io.EOF && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		return fmt.Errorf("expected the channel closed, got %+v, %v", f, err)
	}
	return nil
}

// sync sends SYNC and returns the answer.
func (c *cfwClient) sync(id string, keepAlive string) *Frame {
	c.t.Helper()
	h := []Field{{"Dialog-ID", "d-" + id}}
	if keepAlive != "" {
		h = append(h, Field{"Keep-Alive", keepAlive})
	}
	return c.do(Frame{TransID: id, Method: "SYNC", Header: h})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func TestControlChannel(t *testing.T) {
	s := startControl(t, 10*time.Second)
	c := dialControl(t, s)

	// Before SYNC, nothing else is served.
	if r := c.do(Frame{TransID: "ka000001", Method: "K-ALIVE"}); r.Status != 406 {
		t.Errorf("K-ALIVE before SYNC: %d", r.Status)
	}
	// SYNC needs a Dialog-ID and a sane Keep-Alive.
	if r := c.do(Frame{TransID: "sync0001", Method: "SYNC", Header: []Field{{"Keep-Alive", "100"}}}); r.Status != 400 {
		t.Errorf("SYNC without Dialog-ID: %d", r.Status)
	}
	if r := c.do(Frame{TransID: "sync0002", Method: "SYNC", Header: []Field{{"Dialog-ID", "d1"}, {"Keep-Alive", "soon"}}}); r.Status != 400 {
		t.Errorf("SYNC with a bad Keep-Alive: %d", r.Status)
	}
	r := c.do(Frame{TransID: "8djae7khauj", Method: "SYNC", Header: []Field{
		{"Dialog-ID", "fd4fush5117"}, {"Keep-Alive", "100"}, {"Packages", "msc-ivr/1.0, msc-mixer/1.0"}}})
	if ka, _ := r.Get("Keep-Alive"); r.Status != 200 || ka != "100" {
		t.Errorf("SYNC: %+v", r)
	}
	if r := c.do(Frame{TransID: "ka000002", Method: "K-ALIVE"}); r.Status != 200 {
		t.Errorf("K-ALIVE: %d", r.Status)
	}
	if r := c.do(Frame{TransID: "ctl00001", Method: "CONTROL", Header: []Field{{"Control-Package", "msc-ivr/1.0"}}, Body: []byte("<mscivr/>")}); r.Status != 420 {
		t.Errorf("CONTROL: %d", r.Status)
	}
	if r := c.do(Frame{TransID: "rep00001", Method: "REPORT"}); r.Status != 405 {
		t.Errorf("REPORT: %d", r.Status)
	}
	st := s.status()
	if len(st.Channels) != 1 {
		t.Fatalf("status %+v", st)
	}
	ch := st.Channels[0]
	if !ch.Synced || ch.DialogID != "fd4fush5117" || ch.KeepAlive != 100*time.Second ||
		!slices.Equal(ch.Packages, []string{"msc-ivr/1.0", "msc-mixer/1.0"}) || ch.Requests != 7 ||
		ch.Remote.String() != c.c.LocalAddr().String() || st.Accepted != 1 {
		t.Errorf("channel status %+v", st)
	}

	// Garbage framing: this channel is closed, the listener lives on.
	if _, err := c.c.Write([]byte("\x16\x03\x01\x02\x00garbage\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.closed()
	c2 := dialControl(t, s)
	if r := c2.do(Frame{TransID: "sync0003", Method: "SYNC", Header: []Field{{"Dialog-ID", "d2"}, {"Keep-Alive", "5"}}}); r.Status != 200 {
		t.Errorf("SYNC on a second channel: %d", r.Status)
	}
	if st := s.status(); st.Dropped != 1 || st.Accepted != 2 || len(st.Channels) != 1 {
		t.Errorf("after garbage: %+v", st)
	}
}

// A channel on which nothing arrives for its keep-alive is closed; one
// that keeps sending K-ALIVE stays.
func TestControlKeepAliveTimeout(t *testing.T) {
	s := startControl(t, 10*time.Second, func(p *controlParams) { p.minKA = time.Second })
	quiet := dialControl(t, s)
	if r := quiet.do(Frame{TransID: "sync0001", Method: "SYNC", Header: []Field{{"Dialog-ID", "d1"}, {"Keep-Alive", "1"}}}); r.Status != 200 {
		t.Fatalf("SYNC: %d", r.Status)
	}
	quiet.closed() // after about one second of silence
	if st := s.status(); st.Dropped != 1 || len(st.Channels) != 0 {
		t.Errorf("after the timeout: %+v", st)
	}
}

// Before SYNC the configured keep-alive applies.
func TestControlNoSync(t *testing.T) {
	s := startControl(t, 300*time.Millisecond)
	c := dialControl(t, s)
	c.closed()
	if st := s.status(); st.Dropped != 1 {
		t.Errorf("status %+v", st)
	}
}

// More than maxChannels connections (from several sources, each within
// its own cap): the extra ones are closed at once.
func TestControlChannelLimit(t *testing.T) {
	s := startControlAllow(t, 10*time.Second, newControlAllow(nil, []netip.Prefix{netip.MustParsePrefix("127.0.2.0/24")}), nil)
	var cs []*cfwClient
	for i := range maxChannels {
		c := dialFrom(t, s.addr, fmt.Sprintf("127.0.2.%d", 1+i/maxChannelsPerSource))
		// A round trip proves the server has taken the connection.
		if r := c.sync(fmt.Sprintf("sync%04d", i), ""); r.Status != 200 {
			t.Fatalf("SYNC %d: %d", i, r.Status)
		}
		cs = append(cs, c)
	}
	extra := dialFrom(t, s.addr, "127.0.2.200")
	extra.closed()
	if st := s.status(); len(st.Channels) != maxChannels || st.Dropped != 1 {
		t.Errorf("status: %d channels, %d dropped", len(st.Channels), st.Dropped)
	}
	_ = cs
}

// logLines collects log records for a test.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l } // the tests' loggers have none
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

// Only the servers' addresses and the configured ranges may connect; a
// stranger is closed unread, counted, and logged once a minute at most.
func TestControlRefusesStrangers(t *testing.T) {
	logs := &logLines{}
	servers := []target{{server: "hq", addr: netip.MustParseAddrPort("127.0.0.1:5060")}}
	allow := newControlAllow(servers, []netip.Prefix{netip.MustParsePrefix("127.0.1.0/24")})
	s := startControlAllow(t, 10*time.Second, allow, slog.New(logs))

	for i := range 3 {
		stranger := dialFrom(t, s.addr, "127.0.0.2")
		// Whatever it sends is never answered.
		if _, err := stranger.c.Write((&Frame{TransID: fmt.Sprintf("sync%04d", i), Method: "SYNC", Header: []Field{{"Dialog-ID", "x"}}}).Marshal()); err != nil {
			t.Fatal(err)
		}
		if err := stranger.closeErr(); err != nil {
			t.Fatalf("stranger %d: %v", i, err)
		}
	}
	if st := s.status(); st.Refused != 3 || st.Accepted != 0 || len(st.Channels) != 0 {
		t.Errorf("after three strangers: %+v", st)
	}
	if n := logs.count("refused"); n != 1 {
		t.Errorf("%d log lines about refusals, want 1 (one per source per minute): %q", n, logs.lines)
	}

	// The server's address and an address of the range are served.
	for i, src := range []string{"127.0.0.1", "127.0.1.7"} {
		c := dialFrom(t, s.addr, src)
		if r := c.sync(fmt.Sprintf("sync%04d", 10+i), ""); r.Status != 200 {
			t.Errorf("SYNC from %s: %d", src, r.Status)
		}
	}
	if st := s.status(); st.Refused != 3 || st.Accepted != 2 || len(st.Channels) != 2 {
		t.Errorf("after the servers: %+v", st)
	}

	// A new set applies to the next connection: 127.0.0.2 is now a server.
	s.setAllow(newControlAllow([]target{{server: "hq2", addr: netip.MustParseAddrPort("127.0.0.2:5060")}}, nil))
	if r := dialFrom(t, s.addr, "127.0.0.2").sync("sync0020", ""); r.Status != 200 {
		t.Errorf("SYNC from the new server: %d", r.Status)
	}
	if err := dialFrom(t, s.addr, "127.0.0.1").closeErr(); err != nil {
		t.Errorf("old server after the change: %v", err)
	}
	if st := s.status(); st.Refused != 4 {
		t.Errorf("refused %d, want 4", st.Refused)
	}
}

func TestControlAllow(t *testing.T) {
	a := newControlAllow(
		[]target{
			{server: "hq", addr: netip.MustParseAddrPort("192.0.2.10:5060")},
			{server: "hq", addr: netip.MustParseAddrPort("[2001:db8::10]:5060")},
		},
		[]netip.Prefix{netip.MustParsePrefix("198.51.100.77/24"), netip.MustParsePrefix("2001:db8:1::/48")})
	for addr, want := range map[string]bool{
		"192.0.2.10":          true,
		"::ffff:192.0.2.10":   true, // a dual-stack listener's view
		"192.0.2.11":          false,
		"2001:db8::10":        true,
		"2001:db8::10%eth0":   true,
		"2001:db8::11":        false,
		"198.51.100.1":        true, // the range is taken masked
		"198.51.101.1":        false,
		"2001:db8:1:ffff::1":  true,
		"::ffff:198.51.100.9": true,
		"10.0.0.1":            false,
	} {
		if got := a.allows(netip.MustParseAddr(addr)); got != want {
			t.Errorf("allows(%s) = %v, want %v", addr, got, want)
		}
	}
	var none *controlAllow
	if none.allows(netip.MustParseAddr("127.0.0.1")) {
		t.Error("a nil set allows")
	}
}

// The refusal log says a source at most once per minute, and its memory
// stays bounded whatever the number of sources.
func TestRefusalLogLimit(t *testing.T) {
	var l logLimit
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	steps := []struct {
		addr netip.Addr
		at   time.Duration
		want bool
	}{
		{a, 0, true}, {a, time.Second, false}, {b, time.Second, true},
		{a, 59 * time.Second, false}, {a, time.Minute, true}, {b, 61 * time.Second, true},
	}
	for i, st := range steps {
		if got := l.allow(st.addr, t0.Add(st.at)); got != st.want {
			t.Errorf("step %d: allow(%s, +%v) = %v", i, st.addr, st.at, got)
		}
	}
	// A flood of sources once a and b have expired: the first fill the
	// memory (a and b make room), the rest are not logged until those
	// expire in turn.
	src := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	flood := t0.Add(5 * time.Minute)
	logged := 0
	for i := range 3 * maxLoggedSources {
		if l.allow(src(i), flood) {
			logged++
		}
	}
	if len(l.last) > maxLoggedSources || logged != maxLoggedSources {
		t.Errorf("%d sources remembered (bound %d), %d logged", len(l.last), maxLoggedSources, logged)
	}
	if l.allow(src(0), flood.Add(time.Minute-time.Nanosecond)) || !l.allow(src(5*maxLoggedSources), flood.Add(time.Minute)) {
		t.Error("the memory is not renewed after a minute, or before")
	}
}

// 16 idle connections from one allowed source do not lock the softswitch
// out: beyond maxChannelsPerSource they are closed at once, and the rest
// lapse at the SYNC deadline.
func TestControlIdleFlood(t *testing.T) {
	if maxChannelsPerSource*2 > maxChannels {
		t.Fatalf("two sources can take every channel: %d per source, %d in all", maxChannelsPerSource, maxChannels)
	}
	servers := []target{{server: "hq", addr: netip.MustParseAddrPort("127.0.0.1:5060")}}
	allow := newControlAllow(servers, []netip.Prefix{netip.MustParsePrefix("127.0.1.0/24")})
	// A SYNC deadline ample for the flood's round trips.
	s := startControlAllow(t, 10*time.Second, allow, nil, func(p *controlParams) { p.syncTimeout = time.Second })

	var idle []*cfwClient
	for i := range maxChannels {
		c := dialFrom(t, s.addr, "127.0.1.9")
		// Not a SYNC: a request answered (406) without syncing proves the
		// server holds the connection, or its absence that it closed it.
		if _, err := c.c.Write((&Frame{TransID: fmt.Sprintf("kalv%04d", i), Method: "K-ALIVE"}).Marshal()); err != nil {
			t.Fatal(err)
		}
		r, err := ReadFrame(c.r)
		switch {
		case i < maxChannelsPerSource:
			if err != nil || r.Status != 406 {
				t.Fatalf("idle connection %d: %+v, %v", i, r, err)
			}
			idle = append(idle, c)
		default:
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("idle connection %d beyond the per-source cap: %+v, %v", i, r, err)
			}
		}
	}
	if st := s.status(); len(st.Channels) != maxChannelsPerSource || st.Dropped != maxChannels-maxChannelsPerSource {
		t.Errorf("after the flood: %d channels, %d dropped", len(st.Channels), st.Dropped)
	}
	// The softswitch gets in and syncs.
	hq := dialFrom(t, s.addr, "127.0.0.1")
	if r := hq.sync("sync0001", "30"); r.Status != 200 {
		t.Fatalf("softswitch SYNC: %d", r.Status)
	}
	// The idle ones lapse at the SYNC deadline; the softswitch stays.
	for i, c := range idle {
		if err := c.closeErr(); err != nil {
			t.Errorf("idle connection %d: %v", i, err)
		}
	}
	if r := hq.do(Frame{TransID: "kalv9999", Method: "K-ALIVE"}); r.Status != 200 {
		t.Errorf("softswitch K-ALIVE: %d", r.Status)
	}
	if st := s.status(); len(st.Channels) != 1 || !st.Channels[0].Synced || st.Dropped != maxChannels {
		t.Errorf("after the deadline: %+v", st)
	}
}

// A connection that has not completed SYNC by the deadline is closed,
// whether it is silent or keeps sending other requests.
func TestControlSyncDeadline(t *testing.T) {
	// The keep-alive (10 s) would keep both alive past the test's bound.
	s := startControl(t, 10*time.Second, func(p *controlParams) { p.syncTimeout = 200 * time.Millisecond })

	silent := dialControl(t, s)
	_ = silent.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := silent.closeErr(); err != nil {
		t.Errorf("silent: %v", err)
	}

	// A chatty one: K-ALIVE (406 before SYNC) every 50 ms, which would
	// renew a keep-alive timer but not the SYNC deadline.
	chatty := dialControl(t, s)
	_ = chatty.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if _, err := chatty.c.Write((&Frame{TransID: fmt.Sprintf("kalv%04d", i), Method: "K-ALIVE"}).Marshal()); err != nil {
				return
			}
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	}()
	for {
		r, err := ReadFrame(chatty.r)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("chatty unsynced connection still open after 5 s")
			}
			break
		}
		if r.Status != 406 {
			t.Fatalf("K-ALIVE before SYNC: %+v", r)
		}
	}
	if st := s.status(); st.Dropped != 2 || len(st.Channels) != 0 {
		t.Errorf("after the deadline: %+v", st)
	}

	// A SYNC in time lifts the deadline.
	ok := dialControl(t, s)
	if r := ok.sync("sync0001", "5"); r.Status != 200 {
		t.Fatalf("SYNC: %d", r.Status)
	}
	// Three round trips spanning more than the deadline (the ticks are
	// the test's pace, not a synchronisation).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := range 3 {
		<-tick.C
		if r := ok.do(Frame{TransID: fmt.Sprintf("kalv%04d", i), Method: "K-ALIVE"}); r.Status != 200 {
			t.Fatalf("K-ALIVE %d after SYNC: %d", i, r.Status)
		}
	}
}

// The Keep-Alive a SYNC asks for is kept within [minKeepAlive,
// maxKeepAlive], and the answer says the value in force.
func TestControlKeepAliveCap(t *testing.T) {
	if maxKeepAlive > 600*time.Second || minKeepAlive < time.Second {
		t.Fatalf("limits %v–%v", minKeepAlive, maxKeepAlive)
	}
	s := startControl(t, 10*time.Second)
	for i, c := range []struct {
		ask  string
		want time.Duration
	}{
		{"100000", maxKeepAlive},
		{"4294967296", maxKeepAlive},
		{"99999999999999999999", maxKeepAlive},
		{"1", minKeepAlive},
		{"30", 30 * time.Second},
	} {
		cl := dialControl(t, s)
		r := cl.sync(fmt.Sprintf("sync%04d", i), c.ask)
		if ka, _ := r.Get("Keep-Alive"); r.Status != 200 || ka != strconv.Itoa(int(c.want/time.Second)) {
			t.Errorf("Keep-Alive %s: %+v, want %v", c.ask, r, c.want)
		}
		for _, ch := range s.status().Channels {
			if ch.DialogID == "d-"+fmt.Sprintf("sync%04d", i) && ch.KeepAlive != c.want {
				t.Errorf("Keep-Alive %s: channel keeps %v, want %v", c.ask, ch.KeepAlive, c.want)
			}
		}
		cl.c.Close()
	}
}

// The agent's listener allows the addresses its servers resolve to (a
// literal and a name) and Config.ControlAllow, follows a Reconfigure,
// and applies Config.ControlSyncTimeout.
func TestAgentControlAllow(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1", "127.0.0.4")
	n := baseNet(t)
	cfg := testConfig(reg.server(0), "hq2.test:"+strconv.Itoa(int(reg.addrs[1].Port())))
	cfg.ControlAllow = []netip.Prefix{netip.MustParsePrefix("127.0.1.0/24")}
	cfg.ControlSyncTimeout = 200 * time.Millisecond
	a := newAgent(t, cfg, n, WithResolver(fakeResolver{"hq2.test": {netip.MustParseAddr("127.0.0.4")}}))
	run(t, a)
	// The status is published after the allowed set, in the same pass.
	waitStatus(t, a, "both servers resolved", func([]UAStatus) bool {
		svc := a.Service()
		return len(svc.Servers) == 2 && len(svc.Servers[0].Addrs) == 1 && len(svc.Servers[1].Addrs) == 1 && a.Control().Listen.IsValid()
	})
	ctl := a.Control().Listen

	if err := dialFrom(t, ctl, "127.0.0.2").closeErr(); err != nil {
		t.Errorf("stranger: %v", err)
	}
	for i, src := range []string{"127.0.0.1", "127.0.0.4", "127.0.1.5"} {
		if r := dialFrom(t, ctl, src).sync(fmt.Sprintf("sync%04d", i), ""); r.Status != 200 {
			t.Errorf("SYNC from %s: %d", src, r.Status)
		}
	}
	// Config.ControlSyncTimeout: an allowed but silent peer is closed.
	if err := dialFrom(t, ctl, "127.0.0.1").closeErr(); err != nil {
		t.Errorf("unsynced: %v", err)
	}
	if st := a.Control(); st.Refused != 1 || st.Accepted != 4 || st.Dropped != 1 {
		t.Errorf("control status %+v", st)
	}

	// Without the range, its addresses are strangers.
	cfg.ControlAllow = nil
	if err := a.Reconfigure(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := dialFrom(t, ctl, "127.0.1.5").closeErr(); err != nil {
		t.Errorf("range removed: %v", err)
	}
	if st := a.Control(); st.Refused != 2 {
		t.Errorf("refused %d, want 2", st.Refused)
	}
}
