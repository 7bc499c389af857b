package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// notice is one NOTIFY a SIPp phone received: when, and what the busy
// lamp shows (idle, trying, early, confirmed) or "terminated".
type notice struct {
	at    time.Time
	state string
}

var dialogState = regexp.MustCompile(`<state>([a-z]+)</state>`)

// notices reads the NOTIFYs out of s's message trace.
func (s *sippServer) notices() []notice {
	var out []notice
	for _, block := range strings.Split(s.messages(), "\n----------") {
		head, msg, ok := strings.Cut(block, "\n")
		if !ok || !strings.Contains(msg, "message received") {
			continue
		}
		_, msg, _ = strings.Cut(msg, "\n") // the "message received" line
		if !strings.HasPrefix(strings.TrimSpace(msg), "NOTIFY ") {
			continue
		}
		f := strings.Fields(strings.TrimLeft(head, "- "))
		var at time.Time
		if len(f) >= 2 {
			at, _ = time.ParseInLocation("2006-01-02 15:04:05.000000", f[0]+" "+f[1], time.Local)
		}
		n := notice{at: at, state: "idle"}
		switch m := dialogState.FindStringSubmatch(msg); {
		case strings.Contains(msg, "Subscription-State: terminated"):
			n.state = "terminated"
		case m != nil:
			n.state = m[1]
		}
		out = append(out, n)
	}
	return out
}

// TestBusyLampAcrossAWANCut: a SIPp phone in the branch watches another
// user's busy lamp (RFC 4235) through the box while that user takes a
// call, in normal mode and again after the WAN is cut: the lamp goes
// idle, ringing, busy, idle; the unsubscribe ends it. The time from the
// callee's 180 to the ringing NOTIFY at the watcher is the figure.
func TestBusyLampAcrossAWANCut(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")
	doc := benchDoc(4, []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060"}, func(m map[string]any) {
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["hq"] = map[string]any{"targets": []string{nsHQ + ":5060"}, "options_interval_ms": 300, "down_after": 2, "up_after": 2, "hold_s": 2}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	d.waitFor("normal mode", 15*time.Second, func(s api.Status) bool { return s.Mode == "normal" })
	b.registerPhone(t, "user0002", "5072")
	callee := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_answer_late.xml", "-p", "5072")

	lamp := func(mode string) {
		t.Helper()
		csv := filepath.Join(t.TempDir(), "lamp.csv")
		if err := os.WriteFile(csv, []byte("SEQUENTIAL\nuser0003;[authentication username=user0003 password=pw0003];0;user0002\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		watcher := startSIPpServer(t, b.tp, "phone", nsPhone, "uac_blf.xml", "-p", "5073", "-inf", csv, "-m", "1", "-d", "4000", nsBoxLAN+":5060")
		watcher.waitMessage(mode+": the lamp's first NOTIFY", "NOTIFY sip:user0003@", 5*time.Second)
		rung := len(callee.times("sent", "SIP/2.0 180"))
		_, done := b.call(t, "uac_call.xml", "user0002")
		if err := <-done; err != nil {
			t.Fatalf("%s: the call to the watched user: %v", mode, err)
		}
		select {
		case err := <-watcher.done:
			watcher.done <- err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the lamp's SIPp did not finish", mode)
		}
		ns := watcher.notices()
		var seq []string
		for _, n := range ns {
			if len(seq) == 0 || seq[len(seq)-1] != n.state {
				seq = append(seq, n.state)
			}
		}
		got := strings.Join(seq, " ")
		if !regexp.MustCompile(`^idle (trying )?early confirmed idle terminated$`).MatchString(got) {
			t.Errorf("%s: the lamp showed %q, want idle, (trying,) early, confirmed, idle, terminated", mode, got)
		}
		if rings := callee.times("sent", "SIP/2.0 180"); len(rings) > rung {
			for _, n := range ns {
				if n.state == "early" {
					figure(t, "blf_ringing_notify_"+mode, n.at.Sub(rings[rung]))
					break
				}
			}
		}
		watcher.stop()
		t.Logf("%s: %d NOTIFYs: %s", mode, len(ns), got)
	}
	b.inBothModes(d, lamp)
	d.stop()
}

// TestCallPickupInNamespaces: a call rings user0002; user0003 picks it
// up with **user0002 from its own phone; the relay then carries audio
// both ways between the caller and the picker, and the CDR names the
// picker.
func TestCallPickupInNamespaces(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	doc := benchDoc(4, []string{"udp:lan0:5060"}, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["media"] = map[string]any{"relay": true, "port_min": 30000, "port_max": 30999}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	caller := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40000"), 0)
	picker := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40002"), 0)
	b.registerPhone(t, "user0002", "5072")
	callee := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_ring.xml", "-p", "5072")
	since := time.Now()
	traceA, done := b.call(t, "uac_call_long.xml", "user0002", "-d", "3000")
	callee.waitMessage("the callee rings", "SIP/2.0 180", 5*time.Second)

	csv := filepath.Join(t.TempDir(), "picker.csv")
	if err := os.WriteFile(csv, []byte("SEQUENTIAL\nuser0003;[authentication username=user0003 password=pw0003];0;**user0002\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pick := startSIPpServer(t, b.tp, "phone", nsPhone, "uac_pickup.xml", "-p", "5073", "-inf", csv, "-m", "1", nsBoxLAN+":5060")
	toPicker, toCaller := pick.answerMedia(), traceA.answerMedia()
	var wg sync.WaitGroup
	wg.Go(func() { caller.send(toCaller, 100) })
	wg.Go(func() { picker.send(toPicker, 100) })
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("the picked-up call: %v", err)
	}
	select {
	case err := <-pick.done:
		pick.done <- err
		if err != nil {
			t.Errorf("the picker's SIPp: %v\n%s", err, tail(pick.out.String(), 2000))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the picker's SIPp did not finish")
	}
	callee.waitMessage("the callee's ringing ended", "CANCEL sip:user0002@", time.Second)
	got := func(p *rtpPeer) int { p.mu.Lock(); defer p.mu.Unlock(); return p.got }
	t.Logf("caller received %d, picker %d of 100 packets", got(caller), got(picker))
	if got(caller) < 80 || got(picker) < 80 {
		t.Errorf("media after the pickup: caller received %d, picker %d of 100", got(caller), got(picker))
	}
	var recs []api.CDR
	if _, ok := d.poll(10*time.Second, func(api.Status) bool {
		recs, _ = d.api.CDRs(t.Context(), since, 0)
		return len(recs) > 0
	}); !ok || recs[0].Dialled != "user0002" || recs[0].Routed != "user0003" || recs[0].Disposition != "answered" {
		t.Errorf("CDRs %+v, want user0002's call answered by user0003", recs)
	}
	d.stop()
}
