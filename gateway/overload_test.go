package gateway

import (
	"fmt"
	"hash/crc32"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/siptarget"
)

// fakeClock drives an overloadGate in tests (read by the server's
// goroutines, moved by the test's).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// testGate is a gate on a fake clock whose live heap is what *heap says.
func testGate() (*overloadGate, *fakeClock, *atomic.Uint64) {
	c := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	g := newOverloadGate()
	g.now = c.now
	var heap atomic.Uint64
	g.heapLive = heap.Load
	return g, c, &heap
}

// interval records samples spread over the gate's current interval and
// moves the clock to its end.
func interval(g *overloadGate, c *fakeClock, record func(time.Duration), samples ...time.Duration) {
	for _, d := range samples {
		record(d)
		c.advance(g.interval / time.Duration(len(samples)+1))
	}
	c.set(g.start.Add(g.interval))
}

// admitting calls refuseNew n times and returns how many it admitted.
func admitting(g *overloadGate, n int) int {
	admitted := 0
	for range n {
		if !g.refuseNew() {
			admitted++
		}
	}
	return admitted
}

// gateStep is one interval of g: offered new calls, each admitted one
// followed by its setup delay and the end of its setup; it returns how
// many were admitted.
func gateStep(g *overloadGate, c *fakeClock, offered int, delay time.Duration) int {
	return gateStepFinishing(g, c, offered, delay, offered)
}

// gateStepFinishing is gateStep with at most finishing setups ended in the
// interval.
func gateStepFinishing(g *overloadGate, c *fakeClock, offered int, delay time.Duration, finishing int) int {
	n := 0
	interval(g, c, func(time.Duration) {
		if !g.refuseNew() {
			n++
			g.observe(delay)
			if n <= finishing {
				g.finish()
			}
		}
	}, slices.Repeat([]time.Duration{delay}, offered)...)
	return n
}

// pace is the gate's pace after intervals that finished these many setups
// (an average with weight 1/overloadPaceIntervals, from 0).
func pace(finished ...int) float64 {
	p := 0.0
	for _, n := range finished {
		p += (float64(n) - p) / overloadPaceIntervals
	}
	return p
}

// After an interval whose smallest delay was over the target, the next
// admits overloadDecrease per cent of the calls the last one admitted
// (it admitted more than half the pace: demand, not a pause) and refuses
// the rest; while the overload lasts the cut stands until overloadHold has
// passed, then is cut again; quick intervals that use the quota raise it
// by an eighth; overloadCalm intervals of demand under half the quota lift
// it.
func TestOverloadGate(t *testing.T) {
	g, c, _ := testGate()
	step := func(offered int, delay time.Duration) int { return gateStep(g, c, offered, delay) }
	slow, quick := time.Second, time.Millisecond
	if n := step(200, quick); n != 200 {
		t.Fatalf("a new gate admitted %d of 200", n)
	}
	if n := step(200, slow); n != 200 {
		t.Fatalf("the first slow interval admitted %d of 200; the verdict is for the next", n)
	}
	cut := 200 * overloadDecrease / 100
	if n := step(200, slow); n != cut {
		t.Fatalf("after a slow interval of 200 admissions: %d admitted, want %d", n, cut)
	}
	if q := g.refusedQueue.Load(); q != uint64(200-cut) {
		t.Fatalf("refusals counted: %d, want %d", q, 200-cut)
	}
	for range overloadHold/g.interval - 1 {
		if n := step(200, slow); n != cut {
			t.Fatalf("within overloadHold of the cut: %d admitted, want %d", n, cut)
		}
	}
	cut2 := cut * overloadDecrease / 100
	if n := step(200, quick); n != cut2 {
		t.Fatalf("after the hold, slow again: %d admitted, want %d", n, cut2)
	}
	grown := cut2 + cut2/overloadIncrease
	if n := step(200, quick); n != grown {
		t.Fatalf("after a quick interval: %d admitted, want %d", n, grown)
	}
	few := grown/2 - 1
	for i := range overloadCalm {
		if step(few, quick) != few {
			t.Fatalf("fewer calls than the quota were not all admitted")
		}
		g.mu.Lock()
		g.roll(g.now())
		limited := g.limited
		g.mu.Unlock()
		if i < overloadCalm-1 && !limited {
			t.Fatalf("the quota lifted after %d intervals under half of it, want %d", i+1, overloadCalm)
		}
	}
	if n := step(300, quick); n != 300 {
		t.Fatalf("%d intervals of demand under half the quota did not lift it: %d of 300 admitted", overloadCalm, n)
	}
}

// A pause of the process (one interval with few admissions and a long
// delay, then a gap without samples) cuts the quota only to the floor,
// three quarters of the pace, and the gap does not lift it; a silence of
// overloadSilence does. A second pause while the quota stands is an
// overload like any other: it halves what the interval admitted.
func TestOverloadGatePause(t *testing.T) {
	g, c, _ := testGate()
	step := func(offered int, delay time.Duration) int { return gateStep(g, c, offered, delay) }
	quick, slow := time.Millisecond, 96*time.Millisecond
	var finished []int
	for range 40 {
		step(200, quick)
		finished = append(finished, 200)
	}
	step(6, slow) // the pause: 6 calls in the interval, each waited
	finished = append(finished, 6)
	floor := int(pace(finished...) * overloadFloor / 100)
	if floor <= 6 {
		t.Fatalf("test set-up: floor %d", floor)
	}
	if n := step(200, quick); n != floor {
		t.Fatalf("after a pause: %d of 200 admitted, want the floor %d (3/4 of the pace)", n, floor)
	}
	c.advance(3 * g.interval) // a gap: the process was frozen, nothing read
	if n := step(200, quick); n >= 200 {
		t.Fatal("a 300-ms gap lifted the quota")
	}
	c.advance(overloadHold)
	step(6, slow)
	if n := step(200, quick); n != 3 {
		t.Fatalf("a pause while limited: %d admitted, want 3", n)
	}
	c.advance(overloadSilence)
	if n := admitting(g, 500); n != 500 {
		t.Fatalf("after a silence: %d of 500 admitted", n)
	}
}

// A cut to nothing (no pace, nothing admitted in the overloaded interval)
// is climbed back one call at a time.
func TestOverloadGateFromNothing(t *testing.T) {
	g, c, _ := testGate()
	g.observe(time.Second) // a setup admitted before the gate's first interval, slow
	c.set(g.start.Add(g.interval))
	if n := gateStep(g, c, 5, time.Millisecond); n != 0 {
		t.Fatalf("after an overloaded interval without admissions: %d admitted, want 0", n)
	}
	if n := gateStep(g, c, 5, time.Millisecond); n != 1 {
		t.Fatalf("after a quiet interval at quota 0: %d admitted, want 1", n)
	}
}

// The socket's sojourn times count the same way, on their own: an
// interval whose smallest sojourn was over the target is overloaded; one
// quick read among slow ones is not; quick INVITE setups do not hide a
// full socket.
func TestOverloadGateSocket(t *testing.T) {
	g, c, _ := testGate()
	step := func(sojourns ...time.Duration) {
		interval(g, c, func(d time.Duration) {
			g.observeSocket(d)
			g.observe(time.Millisecond) // handlers keep up
			g.refuseNew()
		}, sojourns...)
	}
	shedding := func() bool { q, m := g.shedding(); return q || m }
	over := g.socketTarget + time.Millisecond
	step(g.target+time.Millisecond, g.target*2) // over the INVITEs' target, under the socket's
	if shedding() {
		t.Fatal("sojourns under the socket's target: shedding")
	}
	step(time.Second, 2*time.Millisecond)
	if shedding() {
		t.Fatal("the socket drained once: shedding")
	}
	step(time.Second, 2*over, over, over)
	if n, want := admitting(g, 4), 4*overloadDecrease/100; n != want {
		t.Fatalf("every sojourn over the target, 4 admitted: the next interval admitted %d, want %d", n, want)
	}
	if q, _ := g.shedding(); !q {
		t.Fatal("a full socket is not counted as a queue")
	}
}

// While the live heap is over the limit, new calls are shed whatever the
// delays; the heap is read again at most every overloadHeapEvery.
func TestOverloadGateMemory(t *testing.T) {
	g, c, heap := testGate()
	shedding := g.refuseNew
	heap.Store(overloadHeapLive + 1)
	if !shedding() {
		t.Fatal("heap over the limit: not shedding")
	}
	heap.Store(overloadHeapLive / 2)
	if !shedding() {
		t.Fatal("heap read again before overloadHeapEvery")
	}
	c.advance(overloadHeapEvery)
	if shedding() {
		t.Fatal("heap back under the limit: still shedding")
	}
	if q, m := g.refusedQueue.Load(), g.refusedMemory.Load(); q != 0 || m != 2 {
		t.Fatalf("refusals counted queue %d, memory %d; want 0, 2", q, m)
	}
}

// pstnCall starts a server with a PSTN gateway (a UDP socket of the test:
// its INVITEs are trusted) whose DIDs +1555NNNN reach extension NNNN, and
// a phone registered as 1001; before runs before the server does.
func pstnCall(t testing.TB, before ...func(*Server)) (s *Server, gw, callee *phone) {
	t.Helper()
	gwConn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gwConn.Close() })
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.PSTN = []PSTNGateway{{Name: "gw", Target: siptarget.MustParse("udp:"+gwConn.LocalAddr().String(), siptarget.UDP)}}
	cfg.Dialplan = dialplan.Config{Inbound: []dialplan.Inbound{{Match: `^\+1555(\d{4})$`, To: "$1"}}, Extensions: []string{"1001", "1002"}}
	s = startServer(t, cfg, before...)
	srv, _ := net.ResolveUDPAddr("udp", strings.TrimPrefix(s.Listeners()[0], "udp:"))
	gw = &phone{t: t, conn: gwConn, to: srv}
	callee = newPhone(t, s.Listeners()[0])
	callee.registerAs1001()
	return s, gw, callee
}

// While the box sheds, a new call gets a stateless 503 with Retry-After,
// and its retransmission the same answer; the call the box admitted before
// goes on: the retransmission of its INVITE is absorbed by its transaction
// (no 503), the callee's answer reaches the caller, and ACK and BYE work.
// When the gate clears, new calls are admitted again. Over UDP, from a
// PSTN gateway (trusted, no digest), to a registered phone.
func TestOverloadShedsNewCallsKeepsAdmitted(t *testing.T) {
	g, clock, _ := testGate()
	s, gw, callee := pstnCall(t, func(s *Server) { s.overload = g })

	// The admitted call rings at 1001.
	first := gw.newInvite("ov-1", "z9hG4bK-ov1", "+15551001")
	gw.send(first)
	bleg := callee.readRequest("INVITE")
	callee.send(reply(bleg, "180 Ringing", "cl1"))
	gw.readStatus("180")
	g.mu.Lock()
	observed := g.min >= 0
	g.mu.Unlock()
	if !observed {
		t.Fatal("the admitted INVITE's queueing delay was not observed")
	}

	// Overload: in the next interval every setup was slow.
	clock.advance(g.interval)
	g.observe(time.Second)
	clock.advance(g.interval)
	if q, _ := g.shedding(); !q {
		t.Fatal("gate not shedding")
	}
	gw.send(first) // retransmission of the admitted INVITE
	shed := gw.newInvite("ov-2", "z9hG4bK-ov2", "+15551002")
	gw.send(shed)
	res := gw.readStatus("503")
	if header(res, "Retry-After") != overloadRetryAfter || !strings.Contains(header(res, "Call-ID"), "ov-2") {
		t.Fatalf("shed call's answer:\n%s", res)
	}
	gw.send(shed)
	if again := gw.readStatus("503"); header(again, "To") != header(res, "To") {
		t.Fatalf("retransmission answered with To %q, then %q", header(res, "To"), header(again, "To"))
	}
	if q, m := s.OverloadRefusals(); q != 2 || m != 0 {
		t.Fatalf("OverloadRefusals queue %d, memory %d; want 2, 0", q, m)
	}

	// The admitted call is answered, ACKed and hung up through the box.
	callee.send(reply(bleg, "200 OK", "cl1"))
	ok := gw.readStatus("200")
	if !strings.Contains(header(ok, "Call-ID"), "ov-1") {
		t.Fatalf("200 of another call:\n%s", ok)
	}
	gw.send(inDialog("ACK", ok, gw, 1))
	callee.readRequest("ACK")
	gw.send(inDialog("BYE", ok, gw, 2))
	bye := callee.readRequest("BYE")
	callee.send(reply(bye, "200 OK", "cl1"))
	gw.readStatus("200")

	// The gate clears (an interval without admitted setups): new calls
	// are admitted (1002 is not registered: the B2BUA's 480).
	clock.advance(2 * g.interval)
	gw.send(gw.newInvite("ov-3", "z9hG4bK-ov3", "+15551002"))
	if res := gw.readStatus("480"); res == "" {
		t.Fatal("no 480")
	}
}

// newInvite is an INVITE from the PSTN gateway socket to DID, with an offer.
func (p *phone) newInvite(callID, branch, did string) string {
	port := p.conn.LocalAddr().(*net.UDPAddr).Port
	sdp := fmt.Sprintf("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio %d RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n", port+1)
	return fmt.Sprintf("INVITE sip:%s@%s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=%s;rport\r\n"+
		"From: <sip:+15550000@127.0.0.1>;tag=f-%s\r\nTo: <sip:%s@%s>\r\nCall-ID: %s\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\n"+
		"Contact: <sip:gw@127.0.0.1:%d>\r\nContent-Type: application/sdp\r\nContent-Length: %d\r\n\r\n%s",
		did, p.to, port, branch, callID, did, p.to, callID, port, len(sdp), sdp)
}

// readStatus reads until a response with the status code (a prefix of
// it), skipping others (100 Trying, retransmitted provisionals).
func (p *phone) readStatus(code string) string {
	p.t.Helper()
	for range 20 {
		res := p.read()
		if strings.HasPrefix(res, "SIP/2.0 "+code) {
			return res
		}
		if !strings.HasPrefix(res, "SIP/2.0 1") {
			p.t.Fatalf("want %s, got:\n%s", code, res)
		}
	}
	p.t.Fatalf("no %s", code)
	return ""
}

// readRequest reads until a request of the method, skipping others.
func (p *phone) readRequest(method string) string {
	p.t.Helper()
	for range 20 {
		if req := p.read(); strings.HasPrefix(req, method+" ") {
			return req
		}
	}
	p.t.Fatalf("no %s", method)
	return ""
}

// reply answers a request in wire text with status ("200 OK"), adding
// the To tag and, for an INVITE's 200, an answer.
func reply(req, status, tag string) string {
	var b strings.Builder
	b.WriteString("SIP/2.0 " + status + "\r\n")
	for _, h := range []string{"Via", "From", "Call-ID", "CSeq"} {
		b.WriteString(h + ": " + header(req, h) + "\r\n")
	}
	to := header(req, "To")
	if !strings.Contains(to, "tag=") {
		to += ";tag=" + tag
	}
	b.WriteString("To: " + to + "\r\nContact: <sip:1001@127.0.0.1>\r\n")
	if strings.HasPrefix(req, "INVITE ") && strings.HasPrefix(status, "200") {
		sdp := "v=0\r\no=- 2 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
		fmt.Fprintf(&b, "Content-Type: application/sdp\r\nContent-Length: %d\r\n\r\n%s", len(sdp), sdp)
		return b.String()
	}
	return b.String() + "Content-Length: 0\r\n\r\n"
}

// inDialog is an ACK or BYE from the caller p in the dialog of the 2xx;
// its branch is unique to the method, CSeq and call.
func inDialog(method, ok string, p *phone, cseq int) string {
	port := p.conn.LocalAddr().(*net.UDPAddr).Port
	target := strings.Trim(header(ok, "Contact"), "<>")
	if i := strings.IndexByte(target, '>'); i >= 0 {
		target = target[:i]
	}
	n := cseq
	if method == "ACK" {
		n = 1
	}
	callID := header(ok, "Call-ID")
	return fmt.Sprintf("%s %s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-%s%d-%x\r\nFrom: %s\r\nTo: %s\r\n"+
		"Call-ID: %s\r\nCSeq: %d %s\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		method, target, port, strings.ToLower(method), cseq, crc32.ChecksumIEEE([]byte(callID)), header(ok, "From"), header(ok, "To"), callID, n, method)
}

func TestHeapThreshold(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		want  uint64
	}{
		{150 << 20, 75 << 20}, // outpostd's default cap
		{1 << 30, 1 << 29},
		{math.MaxInt64, overloadHeapLive}, // no limit
	} {
		if got := heapThreshold(tc.limit); got != tc.want {
			t.Errorf("heapThreshold(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

// A flood: every interval overloaded, each admitting what it may, the box
// finishing few of the setups. The quota keeps halving at each hold, down
// from the first interval's admissions: the floor follows the setups
// finished, not those admitted.
func TestOverloadGateFlood(t *testing.T) {
	g, c, _ := testGate()
	slow := time.Second
	want := 1000
	if n := gateStepFinishing(g, c, 1000, slow, 20); n != want {
		t.Fatalf("first flood interval: %d admitted, want %d", n, want)
	}
	for cut := range 4 {
		want = want * overloadDecrease / 100
		for i := range overloadHold / g.interval {
			if n := gateStepFinishing(g, c, 1000, slow, 20); n != want {
				t.Fatalf("cut %d, interval %d: %d admitted, want %d", cut+1, i+1, n, want)
			}
		}
	}
}

// Intervals in which the heap refused calls are not calm, however few the
// quota took: the quota stands until the refusals stop.
func TestOverloadGateMemoryNotCalm(t *testing.T) {
	g, c, heap := testGate()
	gateStep(g, c, 200, time.Second)
	if n := gateStep(g, c, 200, time.Second); n != 100 {
		t.Fatalf("after an overloaded interval: %d admitted, want 100", n)
	}
	heap.Store(overloadHeapLive + 1)
	for range 2 * overloadCalm {
		if n := gateStep(g, c, 200, time.Millisecond); n != 0 {
			t.Fatalf("heap over the limit: %d admitted", n)
		}
	}
	heap.Store(0)
	c.advance(overloadHeapEvery)
	if n := gateStep(g, c, 200, time.Millisecond); n >= 200 {
		t.Fatalf("the heap's refusals lifted the quota: %d of 200 admitted", n)
	}
}
