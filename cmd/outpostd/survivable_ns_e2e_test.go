package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netns"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// The branch of docs/design.md §5, built in network namespaces:
//
//	ns phone (198.18.0.20) ── lan0 ┐             ┌ wan0 ── ns hq   (198.18.1.10: SIPp HQ, DNS)
//	                               │  ns box     │
//	                               └ 198.18.0.1  ├ pstn0 ─ ns pstn (198.18.3.2: SIPp PSTN gateway)
//	                                 198.18.1.1 ─┘ 198.18.3.1
//
// The box's default route points at the hq namespace; nothing is routed to
// the host.
const (
	nsBoxLAN   = "198.18.0.1"
	nsPhone    = "198.18.0.20"
	nsBoxWAN   = "198.18.1.1"
	nsHQ       = "198.18.1.10"
	nsBoxPSTN  = "198.18.3.1"
	nsPSTN     = "198.18.3.2"
	nsHQDomain = "hq.bench"
)

type branch struct {
	tp  *netnstest.Topology
	box string // kernel name of the box namespace
}

func newBranch(t *testing.T) *branch {
	t.Helper()
	tp := netnstest.New(t)
	tp.Veth("box", "lan0", "phone", "lan0")
	tp.Veth("box", "wan0", "hq", "wan0")
	tp.Veth("box", "pstn0", "pstn", "pstn0")
	for _, x := range []struct{ ns, ifc, cidr string }{
		{"box", "lan0", nsBoxLAN + "/24"}, {"phone", "lan0", nsPhone + "/24"},
		{"box", "wan0", nsBoxWAN + "/24"}, {"hq", "wan0", nsHQ + "/24"},
		{"box", "pstn0", nsBoxPSTN + "/24"}, {"pstn", "pstn0", nsPSTN + "/24"},
	} {
		tp.Addr(x.ns, x.ifc, x.cidr)
		tp.Up(x.ns, x.ifc)
	}
	tp.Route("box", "add", "default", "via", nsHQ)
	tp.Route("phone", "add", "default", "via", nsBoxLAN)
	tp.Route("hq", "add", "198.18.0.0/16", "via", nsBoxWAN)
	tp.Route("pstn", "add", "198.18.0.0/16", "via", nsBoxPSTN)
	return &branch{tp: tp, box: tp.NS("box")}
}

// registerPhone registers userNNNN (password pwNNNN) from the phone
// namespace's port, where a SIPp scenario then answers for it.
func (b *branch) registerPhone(t *testing.T, user, port string) {
	t.Helper()
	csv := filepath.Join(t.TempDir(), "register-"+user+".csv")
	line := fmt.Sprintf("SEQUENTIAL\n%s;[authentication username=%s password=pw%s];3600\n", user, user, strings.TrimPrefix(user, "user"))
	if err := os.WriteFile(csv, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sippIn(t, b.tp.NS("phone"), "reg_auth.xml", nsBoxLAN+":5060", csv, 1, 10, "-i", nsPhone, "-p", port); err != nil {
		t.Fatalf("%s registration: %v\n%s", user, err, tail(out, 2000))
	}
}

// call starts user0000's call to number from the phone namespace with a
// SIPp scenario and flags (-d and so on); it returns the caller's message
// trace and the channel that gets SIPp's result when the call is over.
func (b *branch) call(t *testing.T, scenario, number string, flags ...string) (*sippServer, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	csv := filepath.Join(dir, "caller.csv")
	line := "SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;" + number + "\n"
	if err := os.WriteFile(csv, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	trace := &sippServer{t: t, trace: filepath.Join(dir, "messages.log")}
	done := make(chan error, 1)
	args := append([]string{"-i", nsPhone, "-trace_msg", "-message_file", trace.trace}, flags...)
	go func() {
		out, err := sippIn(t, b.tp.NS("phone"), scenario, nsBoxLAN+":5060", csv, 1, 100, args...)
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, tail(out, 2000))
		}
		done <- err
	}()
	return trace, done
}

// dnsInNS serves the HQ zone (SRV _sip._udp → hq1 → 198.18.1.10) from a
// real miekg/dns server whose socket lives in namespace ns.
func (b *branch) dnsInNS(t *testing.T, ns, addr string) {
	t.Helper()
	h := b.tp.Handle(ns)
	pc := listenUDPIn(t, h, addr)
	mux := dns.NewServeMux()
	mux.HandleFunc(nsHQDomain+".", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		for _, q := range r.Question {
			switch {
			case q.Qtype == dns.TypeSRV && q.Name == "_sip._udp."+nsHQDomain+".":
				m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 60},
					Priority: 10, Weight: 10, Port: 5060, Target: "hq1." + nsHQDomain + "."})
			case q.Qtype == dns.TypeA && q.Name == "hq1."+nsHQDomain+".":
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A: net.ParseIP(nsHQ)})
			}
		}
		_ = w.WriteMsg(m)
	})
	serveDNS(t, pc, mux)
}

// serveDNS serves mux on pc (a real miekg/dns server) until the test ends.
func serveDNS(t *testing.T, pc net.PacketConn, mux *dns.ServeMux) {
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: mux, NotifyStartedFunc: func() { close(started) }}
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { srv.Shutdown(); <-done })
}

// listenUDPIn opens a UDP socket inside the namespace h: the socket stays
// in the namespace it was created in, whichever goroutine serves it.
func listenUDPIn(t *testing.T, h netns.NsHandle, addr string) net.PacketConn {
	t.Helper()
	type result struct {
		pc  net.PacketConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// A thread that switched namespace is never returned to the
		// scheduler: exiting the goroutine while locked kills the thread.
		runtime.LockOSThread()
		if err := netns.Set(h); err != nil {
			ch <- result{err: err}
			return
		}
		pc, err := net.ListenPacket("udp", addr)
		ch <- result{pc, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen %s in namespace: %v", addr, r.err)
	}
	return r.pc
}

// sippServer runs a long-lived SIPp scenario in namespace ns (tp nil: the
// test's own) on ip:5060
// (-aa answers OPTIONS outside the scenario) with a message trace; wait
// returns the trace once SIPp ended by itself, stop ends it.
type sippServer struct {
	t     *testing.T
	done  chan error
	trace string
	out   *syncBuffer
	stop  func()
}

func startSIPpServer(t *testing.T, tp *netnstest.Topology, ns, ip, scenario string, extra ...string) *sippServer {
	t.Helper()
	sf, _ := filepath.Abs(filepath.Join("testdata", "sipp", scenario))
	work := t.TempDir()
	trace := filepath.Join(work, "messages.log")
	args := append([]string{"sipp", "-sf", sf, "-i", ip, "-p", "5060", "-aa", "-nostdin", "-timeout", "170",
		"-trace_msg", "-message_file", trace}, extra...)
	cmd := exec.Command(args[0], args[1:]...)
	if tp != nil {
		cmd = tp.Command(ns, args...)
	}
	cmd.Dir = work
	s := &sippServer{t: t, done: make(chan error, 1), trace: trace, out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Kill()
		<-s.done
	}
	t.Cleanup(s.stop)
	return s
}

// messages returns what SIPp has traced so far.
func (s *sippServer) messages() string {
	b, _ := os.ReadFile(s.trace)
	return string(b)
}

// waitMessage waits until the trace contains sub.
func (s *sippServer) waitMessage(what, sub string, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(s.messages(), sub) {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: %q not seen within %v\n%s", what, sub, within, tail(s.messages(), 3000))
		}
		time.Sleep(50 * time.Millisecond) // SIPp writes its trace file; no event to wait on
	}
}

// times returns, from the timestamps of SIPp's message trace, when it sent
// (dir "sent") or received (dir "received") each message whose first line
// starts with prefix (e.g. "SIP/2.0 200 OK", "REGISTER ").
func (s *sippServer) times(dir, prefix string) []time.Time {
	var out []time.Time
	var stamp time.Time
	match := false
	for _, line := range strings.Split(s.messages(), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "-----"):
			// "----------- 2026-11-29\t18:33:04.123456"
			f := strings.Fields(strings.TrimLeft(line, "- "))
			stamp = time.Time{}
			if len(f) >= 2 {
				stamp, _ = time.ParseInLocation("2006-01-02 15:04:05.000000", f[0]+" "+f[1], time.Local)
			}
			match = false
		case strings.Contains(line, "message "+dir):
			match = true
		case match && line != "":
			if strings.HasPrefix(line, prefix) && !stamp.IsZero() {
				out = append(out, stamp)
			}
			match = false // only the first line of the message
		}
	}
	return out
}

// sentAt returns when SIPp first sent a message starting with prefix.
func (s *sippServer) sentAt(prefix string) (time.Time, bool) {
	ts := s.times("sent", prefix)
	if len(ts) == 0 {
		return time.Time{}, false
	}
	return ts[0], true
}

// figure logs one measured figure in a form bench/survivable_bench.sh collects.
func figure(t *testing.T, name string, d time.Duration) {
	t.Logf("FIGURE %s_ms=%.0f", name, float64(d)/float64(time.Millisecond))
}

// fallbackFigure records the time from detection to the PSTN gateway's
// 200 OK for the first fallback call, and how it splits: the test noticing
// the mode change and starting SIPp (polling, process start-up), then the
// call itself from the phone's first INVITE (digest round trip included)
// to the answer at the PSTN gateway.
func fallbackFigure(t *testing.T, caller, pstn *sippServer, name string, detected time.Time) {
	t.Helper()
	ok, found := pstn.sentAt("SIP/2.0 200 OK")
	invite, sent := caller.sentAt("INVITE ")
	if !found || !sent {
		t.Errorf("%s: no INVITE in the caller's trace or no 200 OK in the PSTN gateway's:\n%s\n%s", name,
			tail(caller.messages(), 1000), tail(pstn.messages(), 1000))
		return
	}
	figure(t, name, ok.Sub(detected))
	figure(t, name+"_test_overhead", invite.Sub(detected))
	figure(t, name+"_setup", ok.Sub(invite))
}

// TestSurvivableInNamespaces: scenarios (a) carrier loss, (b) silent loss
// and (c) failback of the survivable-mode issue, with (e) 1000 phones
// refreshing their registrations throughout.
func TestSurvivableInNamespaces(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	b.dnsInNS(t, "hq", nsHQ+":53")
	// -deadcall_wait 1000: SIPp drops for 33 s any message whose Call-ID
	// ended a scenario (as retransmissions); an upstream refresh reuses
	// its Call-ID (RFC 3261 §10.2.4) and must reach the scenario.
	hq := startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")

	const users = 1000
	doc := benchDoc(users, []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060", "udp:" + nsBoxPSTN + ":5060"}, func(m map[string]any) {
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"domain": nsHQDomain, "dns_servers": []string{nsHQ + ":53"}, "options_interval_ms": 300,
			"down_after": 2, "up_after": 2, "hold_s": 2, "pstn_prefix": "+7843555",
			"register_upstream": true, "auth_username": "branch1", "auth_password": "trunk-secret"}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": nsPSTN + ":5060"}}}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	hqTarget := "udp:" + nsHQ + ":5060"
	d.waitFor("normal mode, HQ found by SRV and answering probes", 15*time.Second, func(s api.Status) bool {
		return s.Mode == "normal" && len(s.HQ) == 1 && s.HQ[0].Target == hqTarget && s.HQ[0].Up && s.HQ[0].LastRTTMs > 0
	})
	if out, err := d.ctl("route", "2001"); err != nil || !strings.Contains(out, "hq -> 2001") || !strings.Contains(out, hqTarget) {
		t.Fatalf("route 2001 in normal mode: %v\n%s", err, out)
	}

	// (e) 1000 phones refresh their registrations every few seconds from
	// before the first cut until after the last failback.
	refresh := make(chan error, 1)
	var refreshOut string
	go func() {
		out, err := sippIn(t, b.tp.NS("phone"), "reg_auth.xml", nsBoxLAN+":5060", usersCSV(t, users, rightPassword, 3600),
			4*users, 100, "-i", nsPhone)
		refreshOut = out
		refresh <- err
	}()

	// call places one call from user0000 in the phone namespace to number;
	// SIPp's message trace goes to the returned caller's trace file. (Rate
	// 100/s: SIPp places the first call one period after it starts.)
	call := func(number string) (*sippServer, error) {
		dir := t.TempDir()
		caller := filepath.Join(dir, "caller.csv")
		line := fmt.Sprintf("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;%s\n", number)
		if err := os.WriteFile(caller, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		trace := &sippServer{t: t, trace: filepath.Join(dir, "messages.log")}
		out, err := sippIn(t, b.tp.NS("phone"), "uac_call.xml", nsBoxLAN+":5060", caller, 1, 100, "-i", nsPhone,
			"-trace_msg", "-message_file", trace.trace)
		if err != nil {
			return trace, fmt.Errorf("%w\n%s", err, tail(out, 3000))
		}
		return trace, nil
	}
	lastTransition := func(s api.Status) api.ModeTransition { return s.Transitions[len(s.Transitions)-1] }
	survivable := func(s api.Status) bool { return s.Mode == "survivable" }
	normal := func(s api.Status) bool { return s.Mode == "normal" }

	// (a) carrier loss.
	cut := time.Now()
	b.tp.Down("box", "wan0")
	s := d.waitFor("survivable after carrier loss", 5*time.Second, survivable)
	tr := lastTransition(s)
	if !strings.HasPrefix(tr.Reason, "WAN ") {
		t.Errorf("carrier-loss transition does not say why: %+v", tr)
	}
	figure(t, "carrier_loss_detect", tr.At.Sub(cut))
	pstn := startSIPpServer(t, b.tp, "pstn", nsPSTN, "uas_answer.xml")
	caller, err := call("2001")
	if err != nil {
		t.Fatalf("(a) HQ-extension call in survivable mode: %v", err)
	}
	pstn.waitMessage("(a) PSTN gateway INVITE", "INVITE sip:+78435552001@", 5*time.Second)
	fallbackFigure(t, caller, pstn, "carrier_loss_first_fallback_call", tr.At)
	pstn.stop()

	// (c) failback after carrier returns: only after the hold.
	up := time.Now()
	b.tp.Up("box", "wan0")
	b.tp.Route("box", "replace", "default", "via", nsHQ) // a downed link loses its routes
	s = d.waitFor("normal after the WAN returns", 20*time.Second, normal)
	tr = lastTransition(s)
	if tr.From != "survivable" || tr.At.Sub(up) < 2*time.Second {
		t.Errorf("failback %+v came %v after the link returned: want after the 2 s hold", tr, tr.At.Sub(up))
	}
	figure(t, "carrier_failback", tr.At.Sub(up))

	// (b) silent loss: the link stays up and HQ still receives, but its
	// answers vanish on the way back (a blackhole route in HQ's namespace:
	// the box sees timeouts, not errors, as with a dead upstream router).
	cut = time.Now()
	b.tp.Route("hq", "add", "blackhole", nsBoxWAN+"/32")
	s = d.waitFor("survivable after silent loss", 10*time.Second, survivable)
	tr = lastTransition(s)
	if !strings.Contains(tr.Reason, "HQ") {
		t.Errorf("silent-loss transition: %+v, want the HQ probes as the reason", tr)
	}
	figure(t, "silent_loss_detect", tr.At.Sub(cut))
	pstn = startSIPpServer(t, b.tp, "pstn", nsPSTN, "uas_answer.xml")
	caller, err = call("2002")
	if err != nil {
		t.Fatalf("(b) HQ-extension call after silent loss: %v", err)
	}
	pstn.waitMessage("(b) PSTN gateway INVITE", "INVITE sip:+78435552002@", 5*time.Second)
	fallbackFigure(t, caller, pstn, "silent_loss_first_fallback_call", tr.At)
	pstn.stop()

	up = time.Now()
	b.tp.Route("hq", "del", "blackhole", nsBoxWAN+"/32")
	s = d.waitFor("normal after HQ answers again", 20*time.Second, normal)
	figure(t, "silent_failback", lastTransition(s).At.Sub(up))

	upFinal := lastTransition(s).At

	// A call to HQ goes to HQ again.
	if _, err := call("2003"); err != nil {
		t.Fatalf("call to HQ after failback: %v", err)
	}
	hq.waitMessage("HQ INVITE after failback", "INVITE sip:2003@", 5*time.Second)

	// (c) upstream registration: every phone is registered at HQ with the
	// box as its Contact, and the replay after failback was paced.
	if _, ok := d.poll(90*time.Second, func(s api.Status) bool { return s.Upstream["registered"] == users }); !ok {
		st := d.status()
		t.Fatalf("(c) not every user registered at HQ: %v, failures %+v", st.Upstream, st.UpstreamFailed)
	}
	hq.waitMessage("upstream REGISTER", "Contact: <sip:user0000@"+nsBoxWAN+":5060>", time.Second)
	var replay []time.Time
	for _, at := range hq.times("received", "REGISTER ") {
		if at.After(upFinal) {
			replay = append(replay, at)
		}
	}
	if len(replay) < 100 {
		t.Errorf("(c) only %d upstream REGISTERs reached HQ after failback", len(replay))
	}
	peak := 0
	for i := range replay { // the most REGISTERs in any one second
		n := 0
		for j := i; j < len(replay) && replay[j].Sub(replay[i]) < time.Second; j++ {
			n++
		}
		peak = max(peak, n)
	}
	if peak > 60 {
		t.Errorf("(c) replay after failback peaked at %d REGISTERs/s at HQ, want about 50 (paced)", peak)
	}
	t.Logf("FIGURE upstream_replay_peak_per_s=%d replayed=%d", peak, len(replay))

	// (e) every refresh succeeded across both cuts and failbacks.
	select {
	case err := <-refresh:
		if err != nil {
			t.Errorf("(e) registration refreshes failed across the cuts: %v\n%s", err, tail(refreshOut, 3000))
		}
	case <-time.After(90 * time.Second):
		t.Error("(e) registration refreshes did not finish")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s, err := d.api.Status(ctx); err == nil && s.AORs != users {
		t.Errorf("(e) %d users registered after the cuts, want %d", s.AORs, users)
	}
	d.stop()
}

// TestWANAddressChange is scenario (f): the WAN address changes (a DHCP or
// PPPoE renewal) while an intra-branch call and a PSTN call are up. The
// listen specs name interfaces, so the box binds the new address and closes
// the old; neither call drops (each SIPp caller hangs up normally after
// the change), and HQ-side state follows: upstream registrations and MSR
// registrations are renewed with the new address.
func TestWANAddressChange(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	hq := startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")
	pstn := startSIPpServer(t, b.tp, "pstn", nsPSTN, "uas_answer.xml")
	const newWAN = "198.18.1.2"
	doc := benchDoc(2, []string{"udp:lan0:5060", "udp:wan0:5060", "udp:pstn0:5060"}, func(m map[string]any) {
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"},
			{"name": "pstn", "match": `^9(\d+)$`, "route": "pstn", "strip": 1}}
		// The renewal takes the default route away for a moment: the box is
		// briefly survivable (upstream registration paused) and fails back
		// after the 1 s hold.
		m["hq"] = map[string]any{"targets": []string{nsHQ + ":5060"}, "options_interval_ms": 300, "hold_s": 1,
			"register_upstream": true, "auth_username": "branch1", "auth_password": "trunk-secret"}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": nsPSTN + ":5060"}}}
		m["msr"] = map[string]any{"enabled": true, "name": "branch1-msr", "servers": []string{nsHQ + ":5060"},
			"interfaces": []string{"wan0"}, "register_interval_s": 60, "retry_interval_s": 60}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	s := d.status()
	for _, want := range []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060", "udp:" + nsBoxPSTN + ":5060"} {
		if !slices.Contains(s.Listeners, want) {
			t.Fatalf("listeners %v lack %s (from the interface listen specs)", s.Listeners, want)
		}
	}

	// user0001 answers in the phone namespace on port 5070; user0000 calls it.
	b.registerPhone(t, "user0001", "5070")
	callee := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_answer.xml", "-p", "5070")
	hq.waitMessage("upstream registration of user0001", "Contact: <sip:user0001@"+nsBoxWAN+":5060>", 10*time.Second)
	hq.waitMessage("MSR registration from the old WAN address", "P-Eltex-MSR-Iface-Addr: "+nsBoxWAN, 10*time.Second)

	_, local := b.call(t, "uac_call_long.xml", "user0001", "-d", "6000")
	_, pstnCall := b.call(t, "uac_call_long.xml", "978435550000", "-d", "6000")
	if _, ok := d.poll(10*time.Second, func(s api.Status) bool { return s.CallsActive == 2 }); !ok {
		select {
		case err := <-local:
			t.Fatalf("intra-branch call: %v", err)
		case err := <-pstnCall:
			t.Fatalf("pstn call: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("calls not up: %d", d.status().CallsActive)
		}
	}

	// The renewal: the old address goes, a new one comes, the default route
	// is put back.
	b.tp.IP("box", "addr", "del", nsBoxWAN+"/24", "dev", "wan0")
	b.tp.Addr("box", "wan0", newWAN+"/24")
	b.tp.Route("box", "replace", "default", "via", nsHQ)
	d.waitFor("a listener on the new WAN address", 10*time.Second, func(s api.Status) bool {
		return slices.Contains(s.Listeners, "udp:"+newWAN+":5060") && !slices.Contains(s.Listeners, "udp:"+nsBoxWAN+":5060")
	})
	for name, ch := range map[string]<-chan error{"intra-branch": local, "PSTN": pstnCall} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("(f) the %s call did not survive the WAN address change: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("(f) the %s call did not end", name)
		}
	}
	pstn.waitMessage("PSTN call", "INVITE sip:78435550000@", time.Second)
	callee.waitMessage("intra-branch call", "INVITE sip:user0001@", time.Second)
	if _, ok := d.poll(15*time.Second, func(api.Status) bool {
		return strings.Contains(hq.messages(), "Contact: <sip:user0001@"+newWAN+":5060>")
	}); !ok {
		st := d.status()
		t.Fatalf("no upstream REGISTER with the new address: upstream %v %+v transitions %+v listeners %v", st.Upstream, st.UpstreamFailed, st.Transitions, st.Listeners)
	}
	hq.waitMessage("MSR registration with the new address", "P-Eltex-MSR-Iface-Addr: "+newWAN, 15*time.Second)
	d.stop()
}
