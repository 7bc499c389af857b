package fastpath

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// rig is a listener socket published to a Path, and a peer socket that
// reads the Path's answers.
type rig struct {
	t        *testing.T
	p        *Path
	listener net.PacketConn
	peer     net.PacketConn
	answered atomic.Int32
	local    atomic.Value // the local name the last answer was asked for
	admitted atomic.Int32 // INVITEs Admit let through
	refused  atomic.Int32 // INVITEs Admit refused
	clock    time.Time    // the refusal limiter's clock
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t}
	var err error
	if r.listener, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if r.peer, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.listener.Close(); r.peer.Close() })
	r.p = New(func(req *sip.Request, local string) *sip.Response {
		n := r.answered.Add(1)
		r.local.Store(local)
		res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
		res.AppendHeader(sip.NewHeader("X-Answer", string(rune('0'+n))))
		return res
	}, func(req *sip.Request, local string) (*sip.Response, bool) {
		// Credentials "verify" when there is a Proxy-Authorization; the
		// box is overloaded when the request says so.
		if req.GetHeader("Proxy-Authorization") != nil {
			if req.GetHeader("X-Overload") != nil {
				return sip.NewResponseFromRequest(req, sip.StatusServiceUnavailable, "Service Unavailable", nil), true
			}
			r.admitted.Add(1)
			return nil, false
		}
		r.refused.Add(1)
		return sip.NewResponseFromRequest(req, sip.StatusProxyAuthRequired, "Proxy Authentication Required", nil), false
	}, nil, WithClock(func() time.Time { return r.clock }))
	r.clock = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r.p.SetSockets([]net.PacketConn{r.listener})
	return r
}

// filter passes data to the Path as sipgo would for a datagram from the
// peer to the listener.
func (r *rig) filter(transport, data string) []byte {
	r.t.Helper()
	out, err := r.p.Filter(sip.TransportReadProps{Transport: transport, LocalAddr: r.listener.LocalAddr(), RemoteAddr: r.peer.LocalAddr()}, []byte(data))
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *rig) read() string {
	r.t.Helper()
	buf := make([]byte, 4096)
	r.peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := r.peer.ReadFrom(buf)
	if err != nil {
		r.t.Fatalf("no answer: %v", err)
	}
	return string(buf[:n])
}

func request(method, branch, extra string) string {
	return method + " sip:gw.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:9;branch=" + branch + "\r\nFrom: <sip:a@b>;tag=1\r\n" +
		"To: <sip:b@c>" + extra + "\r\nCall-ID: c1\r\nCSeq: 1 " + method + "\r\nContent-Length: 0\r\n\r\n"
}

// A retransmission (same branch, source and CSeq) gets the cached bytes
// without asking Answer again; a new transaction is answered afresh.
func TestRetransmissionsAreAnsweredFromTheCache(t *testing.T) {
	r := newRig(t)
	reg := request("REGISTER", "z9hG4bK-1", "")
	if out := r.filter("UDP", reg); out != nil {
		t.Fatalf("REGISTER passed on to sipgo: %q", out)
	}
	first := r.read()
	if !strings.HasPrefix(first, "SIP/2.0 200") || !strings.Contains(first, "X-Answer: 1") {
		t.Fatalf("answer %q", first)
	}
	if got := r.local.Load(); got != "udp:"+r.listener.LocalAddr().String() {
		t.Errorf("Answer was told local %v", got)
	}
	r.filter("UDP", reg)
	if again := r.read(); again != first {
		t.Fatalf("retransmission answered differently:\n%s\n%s", first, again)
	}
	r.filter("UDP", request("OPTIONS", "z9hG4bK-2", ""))
	if res := r.read(); !strings.Contains(res, "X-Answer: 2") {
		t.Fatalf("new transaction: %q", res)
	}
	if n := r.answered.Load(); n != 2 {
		t.Fatalf("Answer called %d times, want 2", n)
	}
}

// What the fast path does not answer goes to sipgo untouched; what is not
// SIP, or a REGISTER that does not parse, is dropped and counted.
func TestFilterPassesOrDrops(t *testing.T) {
	r := newRig(t)
	for name, tc := range map[string]struct {
		transport, data string
		pass            bool
	}{
		"tcp register":         {"TCP", request("REGISTER", "z9hG4bK-t", ""), true},
		"re-invite":            {"UDP", request("INVITE", "z9hG4bK-i", ";tag=x"), true},
		"tcp invite":           {"TCP", request("INVITE", "z9hG4bK-ti", ""), true},
		"other ack":            {"UDP", request("ACK", "z9hG4bK-a", ";tag=x"), true},
		"response":             {"UDP", "SIP/2.0 200 OK\r\n\r\n", true},
		"in-dialog options":    {"UDP", request("OPTIONS", "z9hG4bK-d", ";tag=x"), true},
		"binary":               {"UDP", "\x00\x01\x02", false},
		"keep-alive":           {"UDP", "\r\n\r\n", false},
		"lower case":           {"UDP", "hello world", false},
		"unparseable register": {"UDP", "REGISTER garbage\r\n\r\n", false},
	} {
		out := r.filter(tc.transport, tc.data)
		if tc.pass && string(out) != tc.data {
			t.Errorf("%s: not passed on: %q", name, out)
		}
		if !tc.pass && out != nil {
			t.Errorf("%s: passed on", name)
		}
	}
	if n := r.p.Dropped(); n != 4 {
		t.Errorf("dropped %d, want 4", n)
	}
	if n := r.answered.Load(); n != 0 {
		t.Errorf("answered %d", n)
	}
}

// A datagram on a socket the Path was not given goes to sipgo.
func TestUnknownSocketIsPassedOn(t *testing.T) {
	r := newRig(t)
	r.p.SetSockets(nil)
	reg := request("REGISTER", "z9hG4bK-u", "")
	if out := r.filter("UDP", reg); string(out) != reg {
		t.Fatalf("REGISTER on an unknown socket: %q", out)
	}
}

func TestLooksLikeSIP(t *testing.T) {
	for in, want := range map[string]bool{
		"INVITE sip:x SIP/2.0": true,
		"SIP/2.0 200 OK":       true,
		"X-CUSTOM ":            true,
		" INVITE":              false,
		"invite sip:x":         false,
		"":                     false,
		"NOSPACE":              false,
	} {
		if got := looksLikeSIP([]byte(in)); got != want {
			t.Errorf("looksLikeSIP(%q) = %v, want %v", in, got, want)
		}
	}
}
