package msr

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func startControl(t *testing.T, keepAlive time.Duration) *controlServer {
	t.Helper()
	s, err := listenControl(t.Context(), &net.ListenConfig{}, netip.MustParseAddrPort("127.0.0.1:0"), keepAlive, nil)
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
	c, err := net.Dial("tcp", s.addr.String())
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
	_, err := ReadFrame(c.r)
	if err != io.EOF && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		c.t.Fatalf("expected the channel closed, got %v", err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func TestControlChannel(t *testing.T) {
	s := startControl(t, 10*time.Second)
	c := dialControl(t, s)

	// Before SYNC, nothing else is served.
	if r := c.do(Frame{TransID: "ka000001", Method: "K-ALIVE"}); r.Status != 403 {
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
	s := startControl(t, 10*time.Second)
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

// More than maxChannels connections: the extra ones are closed at once.
func TestControlChannelLimit(t *testing.T) {
	s := startControl(t, 10*time.Second)
	var cs []*cfwClient
	for i := range maxChannels {
		c := dialControl(t, s)
		// A round trip proves the server has taken the connection.
		if r := c.do(Frame{TransID: "sync" + string(rune('a'+i)) + "000", Method: "SYNC", Header: []Field{{"Dialog-ID", "d"}}}); r.Status != 200 {
			t.Fatalf("SYNC %d: %d", i, r.Status)
		}
		cs = append(cs, c)
	}
	extra := dialControl(t, s)
	extra.closed()
	if st := s.status(); len(st.Channels) != maxChannels || st.Dropped != 1 {
		t.Errorf("status: %d channels, %d dropped", len(st.Channels), st.Dropped)
	}
	_ = cs
}
