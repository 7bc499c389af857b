package main

import (
	"encoding/binary"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/media/g711"
)

// rtpPeer is a small RTP endpoint of a test: it sends 20 ms G.711 packets
// of a tone and records what it receives (source, payload type, samples).
type rtpPeer struct {
	pc net.PacketConn
	pt byte

	mu      sync.Mutex
	got     int
	sources map[string]int
	pts     map[byte]int
	pcm     []int16     // decoded samples received
	at      []time.Time // arrival times
	stop    chan struct{}
	done    sync.WaitGroup
}

func newRTPPeer(t *testing.T, pc net.PacketConn, pt byte) *rtpPeer {
	p := &rtpPeer{pc: pc, pt: pt, sources: map[string]int{}, pts: map[byte]int{}, stop: make(chan struct{})}
	p.done.Go(func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 12 || buf[0]>>6 != 2 {
				continue // RTCP or garbage
			}
			p.mu.Lock()
			p.got++
			p.at = append(p.at, time.Now())
			p.sources[from.String()]++
			pt := buf[1] & 0x7f
			p.pts[pt]++
			for _, c := range buf[12:n] {
				switch pt {
				case 0:
					p.pcm = append(p.pcm, g711.UlawToLinear(c))
				case 8:
					p.pcm = append(p.pcm, g711.AlawToLinear(c))
				}
			}
			p.mu.Unlock()
		}
	})
	t.Cleanup(func() { pc.Close(); p.done.Wait() })
	return p
}

// tone is sample i of the test tone (a 400 Hz sine at half scale).
func tone(i int) int16 { return int16(16000 * math.Sin(2*math.Pi*400*float64(i)/8000)) }

// send sends n packets of the tone to dst, one every 20 ms.
func (p *rtpPeer) send(dst netip.AddrPort, n int) {
	pkt := make([]byte, 12+160)
	ssrc := uint32(0x5eed0000 | int(p.pt))
	for k := range n {
		pkt[0], pkt[1] = 0x80, p.pt
		binary.BigEndian.PutUint16(pkt[2:], uint16(k))
		binary.BigEndian.PutUint32(pkt[4:], uint32(k*160))
		binary.BigEndian.PutUint32(pkt[8:], ssrc)
		for i := range 160 {
			s := tone(k*160 + i)
			if p.pt == 8 {
				pkt[12+i] = g711.LinearToAlaw(s)
			} else {
				pkt[12+i] = g711.LinearToUlaw(s)
			}
		}
		p.pc.WriteTo(pkt, net.UDPAddrFromAddrPort(dst))
		time.Sleep(20 * time.Millisecond) // the media clock, not synchronisation
	}
}

// sdpMedia finds the c= address and m=audio port of the last SDP in a
// SIPp trace that came from (dir "received") the box.
func sdpMedia(t *testing.T, trace string) netip.AddrPort {
	t.Helper()
	cs := regexp.MustCompile(`c=IN IP4 ([0-9.]+)`).FindAllStringSubmatch(trace, -1)
	ms := regexp.MustCompile(`m=audio (\d+) `).FindAllStringSubmatch(trace, -1)
	if len(cs) == 0 || len(ms) == 0 {
		t.Fatalf("no SDP in trace:\n%s", tail(trace, 2000))
	}
	port, _ := strconv.Atoi(ms[len(ms)-1][1])
	return netip.AddrPortFrom(netip.MustParseAddr(cs[len(cs)-1][1]), uint16(port))
}

// inviteMedia is the media address (c=, m=audio) of the first INVITE s
// received: what the box offered it.
func (s *sippServer) inviteMedia() netip.AddrPort {
	s.t.Helper()
	tr := s.messages()
	i := strings.Index(tr, "INVITE sip:")
	if i < 0 {
		s.t.Fatalf("no INVITE in trace:\n%s", tail(tr, 2000))
	}
	inv := tr[i:]
	if j := strings.Index(inv, "message sent"); j >= 0 {
		inv = inv[:j]
	}
	return sdpMedia(s.t, inv)
}

// answerMedia waits (5 s at most) for a 200 OK with SDP in s's trace and
// returns its media address: what the box answered it.
func (s *sippServer) answerMedia() netip.AddrPort {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr := s.messages()
		if i := strings.LastIndex(tr, "SIP/2.0 200 OK"); i >= 0 && strings.Contains(tr[i:], "m=audio") {
			return sdpMedia(s.t, tr[i:])
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no 200 OK with SDP in trace:\n%s", tail(tr, 2000))
		}
		time.Sleep(20 * time.Millisecond) // SIPp writes its trace file; no event to wait on
	}
}

// TestMediaInNamespaces: the box anchors a call's media between a µ-law
// phone on the LAN and an A-law PSTN gateway on its own interface. Each
// side receives RTP from the box's address on its own interface, the
// samples arrive transcoded (compared as decoded PCM), the CDR carries the
// per-leg statistics, and no relay port stays allocated. Then a call whose
// media stays silent is ended by the inactivity timeout.
func TestMediaInNamespaces(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	doc := benchDoc(2, []string{"udp:lan0:5060", "udp:pstn0:5060"}, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "pstn", "match": `^9(\d+)$`, "route": "pstn", "strip": 1}}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": nsPSTN + ":5060"}}}
		m["media"] = map[string]any{"relay": true, "port_min": 30000, "port_max": 30999, "inactivity_s": 2}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	// RTP endpoints where the SIPp scenarios say their media is.
	phone := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40000"), 0)
	gw := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("pstn"), nsPSTN+":40002"), 8)
	pstn := startSIPpServer(t, b.tp, "pstn", nsPSTN, "uas_answer_pcma.xml")

	callerTrace, done := b.call(t, "uac_call_long.xml", "978435550000", "-d", "3000")
	d.waitFor("the PSTN call answered", 10*time.Second, func(s api.Status) bool { return s.CallsActive == 1 })
	pstn.waitMessage("the PSTN gateway's 200", "SIP/2.0 200 OK", 5*time.Second)
	// The box's media addresses: in its INVITE to the gateway, in its 200 to the phone.
	toGW := pstn.inviteMedia()
	toPhone := callerTrace.answerMedia()
	if toGW.Addr().String() != nsBoxPSTN || toPhone.Addr().String() != nsBoxLAN {
		t.Fatalf("media addresses: to the gateway %v (want %s), to the phone %v (want %s)", toGW, nsBoxPSTN, toPhone, nsBoxLAN)
	}

	var wg sync.WaitGroup
	wg.Go(func() { phone.send(toPhone, 50) })
	wg.Go(func() { gw.send(toGW, 50) })
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("PSTN call: %v", err)
	}
	check := func(name string, p *rtpPeer, wantSrc netip.AddrPort, wantPT byte) {
		t.Helper()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.got < 45 {
			t.Errorf("%s received %d of 50 packets", name, p.got)
		}
		for src := range p.sources {
			if src != wantSrc.String() {
				t.Errorf("%s received RTP from %s, want only from the box's %s", name, src, wantSrc)
			}
		}
		if len(p.pts) != 1 || p.pts[wantPT] == 0 {
			t.Errorf("%s received payload types %v, want only %d", name, p.pts, wantPT)
		}
		// The tone survives the law change: compare the decoded samples
		// with the tone (a packet holds exactly 8 periods of 400 Hz, so
		// every packet starts at the same phase, whichever were lost).
		worst, n := 0.0, 0
		for i := 0; i+160 <= len(p.pcm); i += 160 {
			for j := range 160 {
				worst = math.Max(worst, math.Abs(float64(p.pcm[i+j])-float64(tone(j))))
				n++
			}
		}
		t.Logf("%s: %d packets, decoded samples within %.0f of the tone (%d compared)", name, p.got, worst, n)
		if n == 0 || worst > 1200 {
			t.Errorf("%s: decoded samples differ from the tone by up to %.0f (of 16000) over %d samples", name, worst, n)
		}
	}
	check("the PSTN gateway (A-law)", gw, toGW, 8)
	check("the phone (µ-law)", phone, toPhone, 0)

	// The CDR has the media statistics; no relay port is left.
	var recs []api.CDR
	d.poll(5*time.Second, func(api.Status) bool {
		recs, _ = d.api.CDRs(t.Context(), time.Time{}, 0)
		return len(recs) == 1
	})
	if len(recs) != 1 || !strings.Contains(recs[0].Media, `"packets":`) {
		t.Fatalf("CDR media: %+v", recs)
	}
	if m, _ := d.metrics(); !strings.Contains(m, "outpost_relay_ports_in_use 0") || !strings.Contains(m, "outpost_relay_sessions 0") {
		t.Errorf("relay ports left after the call:\n%s", grepLines(m, "outpost_relay"))
	}

	// A call whose media never flows is ended after inactivity_s.
	startSIPpServer(t, b.tp, "pstn", nsPSTN, "uas_answer_pcma.xml")
	_, done = b.call(t, "uac_call_long.xml", "978435550000", "-d", "20000")
	d.waitFor("the silent call answered", 10*time.Second, func(s api.Status) bool { return s.CallsActive == 1 })
	start := time.Now()
	d.waitFor("the silent call ended by the box", 10*time.Second, func(s api.Status) bool { return s.CallsActive == 0 })
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("silent call lasted %v, want about inactivity_s (2 s)", el)
	}
	<-done // SIPp got our BYE while pausing: its scenario fails, as a real phone would hang up
	d.poll(5*time.Second, func(api.Status) bool {
		recs, _ = d.api.CDRs(t.Context(), time.Time{}, 0)
		return len(recs) == 2
	})
	if len(recs) != 2 || recs[1].Disposition != "media-timeout" {
		t.Errorf("silent call's CDR: %+v", recs)
	}
	d.stop()
}

// TestRelayReleasesPorts: 1000 short calls with relayed media (a SIPp caller
// through the box to a SIPp PSTN gateway, at 100 calls/s) leave no relay
// port or session behind.
func TestRelayReleasesPorts(t *testing.T) {
	needSIPp(t)
	const gw = "127.0.0.79"
	doc := benchDoc(2, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "pstn", "match": `^9(\d+)$`, "route": "pstn", "strip": 1}}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": gw + ":5060"}}}
		m["media"] = map[string]any{"relay": true, "port_min": 31000, "port_max": 32999}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	uas := startSIPpServer(t, nil, "", gw, "hq.xml", "-deadcall_wait", "1000")
	csv := filepath.Join(t.TempDir(), "caller.csv")
	os.WriteFile(csv, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;978435550000\n"), 0o600)
	if out, err := sipp(t, "uac_call.xml", d.listener("udp"), csv, 1000, 100); err != nil {
		t.Fatalf("1000 calls: %v\n%s", err, tail(out, 2000))
	}
	uas.stop()
	// SIPp is done once the last BYE is answered; the box may still be
	// recording that call and freeing its ports.
	for _, want := range []string{`outpost_calls_total{disposition="answered",route="pstn"} 1000`, "outpost_relay_ports_in_use 0", "outpost_relay_sessions 0"} {
		waitMetric(t, d, want, 10*time.Second)
	}
	d.stop()
}

// between counts the packets that arrived in [from, to).
func (p *rtpPeer) between(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.at {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// TestIntraBranchMediaDuringCut is scenario (d) of the survivable-mode
// issue: a call between two branch phones, its media anchored on the box,
// keeps flowing both ways before, during and after a WAN cut (the box goes
// survivable and back meanwhile).
func TestIntraBranchMediaDuringCut(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	hq := startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")
	_ = hq
	doc := benchDoc(2, []string{"udp:lan0:5060", "udp:wan0:5060"}, func(m map[string]any) {
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["hq"] = map[string]any{"targets": []string{nsHQ + ":5060"}, "options_interval_ms": 300, "hold_s": 1}
		m["media"] = map[string]any{"relay": true, "port_min": 30000, "port_max": 30999}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	caller := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40000"), 0)
	callee := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40002"), 0)
	b.registerPhone(t, "user0001", "5070")
	answer := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_answer.xml", "-p", "5070")
	trace, done := b.call(t, "uac_call_long.xml", "user0001", "-d", "8000")
	d.waitFor("the call answered", 10*time.Second, func(s api.Status) bool { return s.CallsActive == 1 })
	answer.waitMessage("the callee's 200", "SIP/2.0 200 OK", 5*time.Second)
	toCallee := answer.inviteMedia()
	toCaller := trace.answerMedia()
	if toCaller.Addr().String() != nsBoxLAN || toCallee.Addr().String() != nsBoxLAN {
		t.Fatalf("media not anchored on the box: caller -> %v, callee -> %v", toCaller, toCallee)
	}

	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() { caller.send(toCaller, 250) }) // 5 s of media each way
	wg.Go(func() { callee.send(toCallee, 250) })
	time.Sleep(1500 * time.Millisecond) // let media flow before the cut (the media clock)
	cut := time.Now()
	b.tp.Down("box", "wan0")
	d.waitFor("survivable after the cut", 5*time.Second, func(s api.Status) bool { return s.Mode == "survivable" })
	time.Sleep(1500 * time.Millisecond) // media during the outage
	restored := time.Now()
	b.tp.Up("box", "wan0")
	b.tp.Route("box", "replace", "default", "via", nsHQ)
	wg.Wait()
	end := time.Now()
	if err := <-done; err != nil {
		t.Fatalf("the intra-branch call dropped: %v", err)
	}
	for _, x := range []struct {
		name string
		p    *rtpPeer
	}{{"caller", caller}, {"callee", callee}} {
		before, during, after := x.p.between(start, cut), x.p.between(cut, restored), x.p.between(restored, end.Add(time.Second))
		t.Logf("%s received %d packets before the cut, %d during, %d after (of 250 sent)", x.name, before, during, after)
		if before < 50 || during < 50 || after < 20 || before+during+after < 240 {
			t.Errorf("(d) media to the %s: %d before, %d during, %d after the cut", x.name, before, during, after)
		}
	}
	d.stop()
}

// TestHoldStopsMediaInNamespaces: a relayed call between two branch phones;
// the caller holds (a=sendonly) and resumes. The callee keeps sending RTP
// all along: the caller receives it before the hold, nothing while held,
// and again after the resume.
func TestHoldStopsMediaInNamespaces(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	doc := benchDoc(2, []string{"udp:lan0:5060"}, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["media"] = map[string]any{"relay": true, "port_min": 30000, "port_max": 30999}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	caller := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40000"), 0)
	callee := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40002"), 0)
	b.registerPhone(t, "user0001", "5070")
	held := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_hold_resume.xml", "-p", "5070")
	traceA, done := b.call(t, "uac_hold_resume.xml", "user0001", "-d", "1500")
	d.waitFor("the call answered", 10*time.Second, func(s api.Status) bool { return s.CallsActive == 1 })
	held.waitMessage("the callee's 200", "SIP/2.0 200 OK", 5*time.Second)
	toCallee := held.inviteMedia()
	// The callee talks for the whole call (3 phases of 1.5 s), the caller
	// too (a held party may still send: sendonly).
	var wg sync.WaitGroup
	wg.Go(func() { callee.send(toCallee, 250) })
	if err := <-done; err != nil {
		t.Fatalf("hold and resume: %v", err)
	}
	wg.Wait()
	held.stop()

	// Phases from the caller's own trace: re-INVITEs sent (hold, resume) and
	// the 200s received for them.
	invites := traceA.times("sent", "INVITE ")
	oks := traceA.times("received", "SIP/2.0 200 OK")
	if len(invites) < 4 || len(oks) < 3 {
		t.Fatalf("caller trace: %d INVITEs sent, %d 200s received:\n%s", len(invites), len(oks), tail(traceA.messages(), 2000))
	}
	answered, holdSent, holdOK, resumeSent, resumeOK := oks[0], invites[2], oks[1], invites[3], oks[2]
	const settle = 100 * time.Millisecond // packets in flight at a phase change
	before := caller.between(answered.Add(settle), holdSent)
	during := caller.between(holdOK.Add(settle), resumeSent)
	after := caller.between(resumeOK.Add(settle), resumeOK.Add(1400*time.Millisecond))
	t.Logf("caller received %d packets before the hold, %d while held, %d after the resume", before, during, after)
	if before < 40 || during > 2 || after < 40 {
		t.Errorf("media to the caller: %d before the hold, %d while held (want none), %d after the resume", before, during, after)
	}
	// The held callee hears the box's music on hold (the caller sends
	// nothing in this test), and only while held.
	music := callee.between(holdOK.Add(settle), resumeSent)
	late := callee.between(resumeOK.Add(settle), resumeOK.Add(1400*time.Millisecond))
	t.Logf("callee received %d music-on-hold packets while held, %d after the resume", music, late)
	if music < 50 || late > 2 {
		t.Errorf("music on hold to the callee: %d packets while held (want about 75), %d after the resume (want none)", music, late)
	}
	callee.mu.Lock()
	var energy float64
	for _, v := range callee.pcm {
		energy += float64(v) * float64(v)
	}
	n := len(callee.pcm)
	callee.mu.Unlock()
	if n == 0 || math.Sqrt(energy/float64(n)) < 300 {
		t.Errorf("music on hold is silence: RMS of %d samples %.0f", n, math.Sqrt(energy/float64(max(n, 1))))
	}
	d.stop()
}
