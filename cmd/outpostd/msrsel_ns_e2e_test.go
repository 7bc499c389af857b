package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// Two boxes and the phones on one LAN (a bridge in namespace lan):
//
//	ns a (box A, 198.18.64.1) ─┐
//	ns b (box B, 198.18.64.2) ─┼─ ns lan (br0) ─ ns phone (198.18.64.20)
const (
	selBoxA  = "198.18.64.1"
	selBoxB  = "198.18.64.2"
	selPhone = "198.18.64.20"
)

// TestRemoteMSRAnchorsCall: box B's MSR registers its interface at box A
// (msr.servers), the site matrix of box A makes box B nearer for box A's
// site, and a call between two phones through box A gets its media
// anchored on box B: both phones are given box B's address, their RTP
// crosses box B both ways (counted at each phone, from box B's address
// only), box A's relay holds nothing, and the BYE frees box B's ports.
// Then box B is made inactive at box A (outpostctl media-resources set):
// the next call is anchored on box A's own relay; made active again but
// cut off the LAN, it does not answer and the call falls back to box A's
// relay.
func TestRemoteMSRAnchorsCall(t *testing.T) {
	needSIPp(t)
	tp := selLAN(t)
	// Box A's site is "a"; box B ("b") is nearer to it than itself.
	da, db := startSelBoxes(t, tp, func(m map[string]any) {
		m["media_resources"] = map[string]any{"matrix": map[string]any{"a": map[string]any{"a": 10, "b": 1}}}
	})

	ph := newSelPhones(t, tp)
	trace, answer, done := ph.call("3000")
	toCaller, toCallee := answered(da, trace, answer)
	if toCaller.Addr().String() != selBoxB || toCallee.Addr().String() != selBoxB {
		t.Fatalf("media not anchored on box B: caller -> %v, callee -> %v (box B is %s)", toCaller, toCallee, selBoxB)
	}
	if m, _ := da.metrics(); !strings.Contains(m, "outpost_relay_ports_in_use 0") || !strings.Contains(m, "outpost_relay_sessions 0") {
		t.Errorf("box A's relay holds ports during a call anchored on box B:\n%s", grepLines(m, "outpost_relay"))
	}
	if m, _ := db.metrics(); !strings.Contains(m, "outpost_relay_ports_in_use 4") {
		t.Errorf("box B does not hold two media connections (4 ports):\n%s", grepLines(m, "outpost_relay"))
	}
	if err := ph.exchange(t, toCaller, toCallee, done); err != nil {
		t.Fatalf("call: %v", err)
	}
	answer.stop()
	// The BYE ended both media connections on box B: its ports are free.
	waitMetric(t, db, "outpost_relay_ports_in_use 0", 5*time.Second)
	if m, _ := da.metrics(); !strings.Contains(m, "outpost_relay_ports_in_use 0") {
		t.Errorf("box A holds relay ports after the call:\n%s", grepLines(m, "outpost_relay"))
	}

	// Box B made inactive at box A: the next call stays on box A's relay.
	if out, err := da.ctl("media-resources", "set", "box-b", "inactive"); err != nil {
		t.Fatalf("media-resources set box-b inactive: %v\n%s", err, out)
	}
	trace, answer, done = ph.call("500")
	da.waitFor("the second call answered", 10*time.Second, func(s api.Status) bool { return s.CallsActive == 1 })
	if got := trace.answerMedia(); got.Addr().String() != selBoxA {
		t.Errorf("with box B inactive the caller got media at %v, want box A's %s", got, selBoxA)
	}
	if err := <-done; err != nil {
		t.Fatalf("second call: %v", err)
	}
	answer.stop()
	if m, _ := db.metrics(); !strings.Contains(m, "outpost_relay_ports_in_use 0") {
		t.Errorf("box B holds ports for a call it was not chosen for:\n%s", grepLines(m, "outpost_relay"))
	}

	// Box B active again but unreachable (its registration still current
	// at box A): the set-up there gets no answer and the call falls back
	// to box A's relay.
	if out, err := da.ctl("media-resources", "set", "box-b", "active"); err != nil {
		t.Fatalf("media-resources set box-b active: %v\n%s", err, out)
	}
	tp.Down("lan", "pb")
	trace, answer, done = ph.call("500")
	da.waitFor("the fallback call answered", 15*time.Second, func(s api.Status) bool { return s.CallsActive == 1 })
	if got := trace.answerMedia(); got.Addr().String() != selBoxA {
		t.Errorf("with box B unreachable the caller got media at %v, want box A's %s", got, selBoxA)
	}
	if err := <-done; err != nil {
		t.Fatalf("fallback call: %v", err)
	}
	answer.stop()
	waitMetric(t, da, "outpost_relay_ports_in_use 0", 5*time.Second)
	tp.Up("lan", "pb")
	da.stop()
	db.stop()
}

// TestMediaBridgedAcrossMSRs: a leg's media is chosen from its user's
// site. The caller (user0000, media_site b) is nearest box B's MSR, the
// callee (user0001, box A's own site a) box A's relay: each phone is
// given its own anchor's address, box B's two media connections are
// joined and one of them faces box A's relay, and RTP crosses both boxes
// both ways (counted at each phone, from its anchor's address only).
func TestMediaBridgedAcrossMSRs(t *testing.T) {
	needSIPp(t)
	tp := selLAN(t)
	da, db := startSelBoxes(t, tp, func(m map[string]any) {
		m["media_resources"] = map[string]any{"matrix": map[string]any{
			"a": map[string]any{"a": 0, "b": 5}, "b": map[string]any{"a": 5, "b": 0}}}
		m["users"].([]map[string]any)[0]["media_site"] = "b"
	})

	ph := newSelPhones(t, tp)
	trace, answer, done := ph.call("3000")
	toCaller, toCallee := answered(da, trace, answer)
	if toCaller.Addr().String() != selBoxB || toCallee.Addr().String() != selBoxA {
		t.Fatalf("media: caller -> %v, callee -> %v; want the caller on box B (%s), the callee on box A (%s)", toCaller, toCallee, selBoxB, selBoxA)
	}
	if m, _ := db.metrics(); !strings.Contains(m, "outpost_relay_ports_in_use 4") {
		t.Errorf("box B does not hold two media connections (4 ports):\n%s", grepLines(m, "outpost_relay"))
	}
	if m, _ := da.metrics(); !strings.Contains(m, "outpost_relay_sessions 1") {
		t.Errorf("box A's relay does not anchor the callee's leg:\n%s", grepLines(m, "outpost_relay"))
	}
	if err := ph.exchange(t, toCaller, toCallee, done); err != nil {
		t.Fatalf("call: %v", err)
	}
	answer.stop()
	waitMetric(t, db, "outpost_relay_ports_in_use 0", 5*time.Second)
	waitMetric(t, da, "outpost_relay_ports_in_use 0", 5*time.Second)
	da.stop()
	db.stop()
}

// selPhones are the caller (user0000) and the callee (user0001,
// registered at box A from selPhone:5070) of this file's calls, with an
// RTP peer each.
type selPhones struct {
	t              *testing.T
	tp             *netnstest.Topology
	caller, callee *rtpPeer
}

func newSelPhones(t *testing.T, tp *netnstest.Topology) *selPhones {
	t.Helper()
	ph := &selPhones{t: t, tp: tp,
		caller: newRTPPeer(t, listenUDPIn(t, tp.Handle("phone"), selPhone+":40000"), 0),
		callee: newRTPPeer(t, listenUDPIn(t, tp.Handle("phone"), selPhone+":40002"), 0)}
	reg := filepath.Join(t.TempDir(), "register.csv")
	os.WriteFile(reg, []byte("SEQUENTIAL\nuser0001;[authentication username=user0001 password=pw0001];3600\n"), 0o600)
	if out, err := sippIn(t, tp.NS("phone"), "reg_auth.xml", selBoxA+":5060", reg, 1, 10, "-i", selPhone, "-p", "5070"); err != nil {
		t.Fatalf("callee registration: %v\n%s", err, tail(out, 2000))
	}
	return ph
}

// call places user0000's call to user0001 through box A, held for hold
// ms: the caller's trace, the callee's answering SIPp, and the caller's
// result when it hangs up.
func (ph *selPhones) call(hold string) (*sippServer, *sippServer, <-chan error) {
	t := ph.t
	answer := startSIPpServer(t, ph.tp, "phone", selPhone, "uas_answer.xml", "-p", "5070")
	dir := t.TempDir()
	csv := filepath.Join(dir, "caller.csv")
	os.WriteFile(csv, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;user0001\n"), 0o600)
	trace := &sippServer{t: t, trace: filepath.Join(dir, "messages.log")}
	done := make(chan error, 1)
	go func() {
		out, err := sippIn(t, ph.tp.NS("phone"), "uac_call_long.xml", selBoxA+":5060", csv, 1, 100,
			"-i", selPhone, "-trace_msg", "-message_file", trace.trace, "-d", hold)
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, tail(out, 2000))
		}
		done <- err
	}()
	return trace, answer, done
}

// exchange sends 50 RTP packets each way, to the caller's media address
// toCaller and the callee's toCallee, waits for the call's end, and
// checks that each phone got at least 45, from its address only.
func (ph *selPhones) exchange(t *testing.T, toCaller, toCallee netip.AddrPort, done <-chan error) error {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { ph.caller.send(toCaller, 50) })
	wg.Go(func() { ph.callee.send(toCallee, 50) })
	wg.Wait()
	if err := <-done; err != nil {
		return err
	}
	for _, x := range []struct {
		name string
		p    *rtpPeer
		from netip.AddrPort
	}{{"caller", ph.caller, toCaller}, {"callee", ph.callee, toCallee}} {
		x.p.mu.Lock()
		got, sources := x.p.got, fmt.Sprint(x.p.sources)
		for src := range x.p.sources {
			if src != x.from.String() {
				t.Errorf("%s received RTP from %s, want only from its media address %v", x.name, src, x.from)
			}
		}
		x.p.mu.Unlock()
		t.Logf("%s received %d of 50 packets (sources %s)", x.name, got, sources)
		if got < 45 {
			t.Errorf("%s received %d of 50 packets", x.name, got)
		}
	}
	return nil
}

// startSelBoxes starts box A (site a, its document edited by editA) and
// box B (site b), each one's MSR UA registering at the other, and waits
// for box B's at box A.
func startSelBoxes(t *testing.T, tp *netnstest.Topology, editA func(map[string]any)) (da, db *daemon) {
	t.Helper()
	cfgA := selBox(t, "box-a", selBoxA, "a", selBoxB, editA)
	cfgB := selBox(t, "box-b", selBoxB, "b", selBoxA, nil)
	da = startDaemonIn(t, tp.NS("a"), t.TempDir(), cfgA)
	db = startDaemonIn(t, tp.NS("b"), t.TempDir(), cfgB)
	waitMSRAt(t, da, "box-b", selBoxB)
	return da, db
}

// answered waits for a call through d to be up and returns the media
// addresses the caller (its trace) and the callee (answer) were given.
func answered(d *daemon, trace, answer *sippServer) (toCaller, toCallee netip.AddrPort) {
	d.waitFor("the call answered", 10*time.Second, func(s api.Status) bool { return s.CallsActive == 1 })
	answer.waitMessage("the callee's 200", "SIP/2.0 200 OK", 5*time.Second)
	return trace.answerMedia(), answer.inviteMedia()
}

// selLAN is the two boxes' and the phones' LAN of this file.
func selLAN(t *testing.T) *netnstest.Topology {
	t.Helper()
	tp := netnstest.New(t)
	tp.IP("lan", "link", "add", "br0", "type", "bridge")
	tp.Up("lan", "br0")
	for _, x := range []struct{ ns, port, cidr string }{{"a", "pa", selBoxA}, {"b", "pb", selBoxB}, {"phone", "pphone", selPhone}} {
		tp.Veth(x.ns, "lan0", "lan", x.port)
		tp.IP("lan", "link", "set", x.port, "master", "br0")
		tp.Up("lan", x.port)
		tp.Addr(x.ns, "lan0", x.cidr+"/24")
		tp.Up(x.ns, "lan0")
	}
	return tp
}

// selBox writes the document of box name at ip, in zone kzn and the
// given site, its MSR UA registering at server; extra edits it.
func selBox(t *testing.T, name, ip, site, server string, extra func(map[string]any)) string {
	t.Helper()
	doc := benchDoc(2, []string{"udp:" + ip + ":5060"}, func(m map[string]any) {
		m["site"].(map[string]any)["zone"] = "kzn"
		m["site"].(map[string]any)["site"] = site
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["media"] = map[string]any{"relay": true, "port_min": 30000, "port_max": 30999}
		m["msr"] = map[string]any{"enabled": true, "name": name, "servers": []string{server + ":5060"}, "service_interface": "lan0",
			"interfaces": []string{"lan0"}, "register_interval_s": 60, "retry_interval_s": 1}
		if extra != nil {
			extra(m)
		}
	})
	return writeJSON(t, filepath.Join(t.TempDir(), name+".json"), doc)
}

// waitMSRAt waits until the MSR UA (the service UA, with the control
// channel) of msr at ip is in d's media resources.
func waitMSRAt(t *testing.T, d *daemon, msr, ip string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := d.ctl("media-resources")
		if err == nil && strings.Contains(out, msr) && strings.Contains(out, ip) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's MSR never registered: %v\n%s", msr, err, out)
		}
		time.Sleep(100 * time.Millisecond) // registration at the box: no event the test can await
	}
}

// waitMetric polls d's metrics until they contain line.
func waitMetric(t *testing.T, d *daemon, line string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m, _ := d.metrics()
		if strings.Contains(m, line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed %q within %v:\n%s", line, within, grepLines(m, "outpost_relay"))
		}
		time.Sleep(100 * time.Millisecond) // metrics have no event to await
	}
}
