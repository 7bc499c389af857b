package main

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// inBothModes runs check in normal mode, cuts the WAN (wan0 down), waits
// for survivable mode and runs it again.
func (b *branch) inBothModes(d *daemon, check func(mode string)) {
	check("normal")
	b.tp.Down("box", "wan0")
	d.waitFor("survivable after the WAN cut", 10*time.Second, func(s api.Status) bool { return s.Mode == "survivable" })
	check("survivable")
}

// TestParkAcrossAWANCut: in normal mode, and again once the WAN is cut,
// user0000 calls user0002, who parks the call with *85 (a blind transfer
// from SIPp, uas_refer.xml, which checks the NOTIFYs and the box's BYE);
// the parked caller hears the box's music on hold; user0003 dials the
// orbit, 701, and talks with the caller through the relay (audio both
// ways) until the caller hangs up. The CDR names the retriever.
func TestParkAcrossAWANCut(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")
	doc := benchDoc(4, []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060"}, func(m map[string]any) {
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
		m["hq"] = map[string]any{"targets": []string{nsHQ + ":5060"}, "options_interval_ms": 300, "down_after": 2, "up_after": 2, "hold_s": 2}
		m["media"] = map[string]any{"relay": true, "port_min": 30000, "port_max": 30999}
		m["park"] = map[string]any{"first": "701", "last": "709"}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	d.waitFor("normal mode", 15*time.Second, func(s api.Status) bool { return s.Mode == "normal" })
	caller := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40000"), 0)
	retriever := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40002"), 0)
	got := func(p *rtpPeer) int { p.mu.Lock(); defer p.mu.Unlock(); return p.got }
	b.registerPhone(t, "user0002", "5072")
	csv := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parkerCSV := csv("parker.csv", "SEQUENTIAL\n*85\n")
	retrieverCSV := csv("retriever.csv", "SEQUENTIAL\nuser0003;[authentication username=user0003 password=pw0003];0;701\n")

	park := func(mode string) {
		t.Helper()
		since := time.Now()
		parker := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_refer.xml", "-p", "5072", "-inf", parkerCSV, "-m", "1")
		traceA, done := b.call(t, "uac_parked.xml", "user0002", "-d", "3000")
		if _, ok := d.poll(10*time.Second, func(api.Status) bool {
			calls, _ := d.api.Calls(t.Context())
			return slices.ContainsFunc(calls, func(c api.Call) bool { return c.State == "parked" && c.Target == "701" })
		}); !ok {
			t.Fatalf("%s: no call parked at 701\n%s", mode, tail(parker.out.String(), 2000))
		}
		// The box's port facing the caller, from its answer to the call:
		// the retrieval re-INVITEs the caller but keeps that port.
		toCaller := traceA.answerMedia()
		select {
		case err := <-parker.done:
			parker.done <- err // for its cleanup
			if err != nil {
				t.Fatalf("%s: the parker's SIPp: %v\n%s", mode, err, tail(parker.out.String(), 2000))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the parker's SIPp did not finish", mode)
		}
		// Music on hold: nobody else sends to the parked caller now.
		held := got(caller)
		if _, ok := d.poll(5*time.Second, func(api.Status) bool { return got(caller) >= held+25 }); !ok {
			t.Fatalf("%s: the parked caller heard %d packets of music in 5 s", mode, got(caller)-held)
		}
		pick := startSIPpServer(t, b.tp, "phone", nsPhone, "uac_pickup.xml", "-p", "5073", "-inf", retrieverCSV, "-m", "1", nsBoxLAN+":5060")
		toRetriever := pick.answerMedia()
		fromBefore, toBefore := got(caller), got(retriever)
		var wg sync.WaitGroup
		wg.Go(func() { caller.send(toCaller, 100) })
		wg.Go(func() { retriever.send(toRetriever, 100) })
		wg.Wait()
		if err := <-done; err != nil {
			t.Fatalf("%s: the parked call: %v", mode, err)
		}
		select {
		case err := <-pick.done:
			pick.done <- err
			if err != nil {
				t.Errorf("%s: the retriever's SIPp: %v\n%s", mode, err, tail(pick.out.String(), 2000))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the retriever's SIPp did not finish", mode)
		}
		atCaller, atRetriever := got(caller)-fromBefore, got(retriever)-toBefore
		t.Logf("%s: after the retrieval the caller received %d, the retriever %d of 100 packets", mode, atCaller, atRetriever)
		if atCaller < 80 || atRetriever < 80 {
			t.Errorf("%s: media after the retrieval: caller received %d, retriever %d of 100", mode, atCaller, atRetriever)
		}
		if atCaller > 110 {
			t.Errorf("%s: the caller received %d packets for the retriever's 100: the music went on", mode, atCaller)
		}
		var recs []api.CDR
		if _, ok := d.poll(10*time.Second, func(api.Status) bool {
			recs, _ = d.api.CDRs(t.Context(), since, 0)
			return len(recs) > 0
		}); !ok || recs[0].Dialled != "user0002" || recs[0].Routed != "user0003" || recs[0].Disposition != "answered" {
			t.Errorf("%s: CDRs %+v, want user0002's call answered by user0003", mode, recs)
		}
	}
	b.inBothModes(d, park)
	d.stop()
}

// TestGroupQueueAcrossAWANCut: in normal mode, and again once the WAN is
// cut, group 1900's only member, user0002, is in a call (user0003's, 3 s
// long) when user0000 calls the group: the box answers and the caller
// hears music on hold; when the member's call ends, the member is rung
// and the caller is moved to it (re-INVITE).
func TestGroupQueueAcrossAWANCut(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")
	doc := benchDoc(4, []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060"}, func(m map[string]any) {
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^(user\d{4}|19\d\d)$`, "route": "local"}}
		m["hq"] = map[string]any{"targets": []string{nsHQ + ":5060"}, "options_interval_ms": 300, "down_after": 2, "up_after": 2, "hold_s": 2}
		m["media"] = map[string]any{"relay": true, "port_min": 30000, "port_max": 30999}
		m["groups"] = []map[string]any{{"extension": "1900", "members": []string{"user0002"}, "queue_s": 30}}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	d.waitFor("normal mode", 15*time.Second, func(s api.Status) bool { return s.Mode == "normal" })
	caller := newRTPPeer(t, listenUDPIn(t, b.tp.Handle("phone"), nsPhone+":40000"), 0)
	got := func(p *rtpPeer) int { p.mu.Lock(); defer p.mu.Unlock(); return p.got }
	b.registerPhone(t, "user0002", "5072")
	member := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_answer_each.xml", "-p", "5072")
	busyCSV := filepath.Join(t.TempDir(), "busy.csv")
	if err := os.WriteFile(busyCSV, []byte("SEQUENTIAL\nuser0003;[authentication username=user0003 password=pw0003];0;user0002\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	queued := func(mode string) {
		t.Helper()
		since := time.Now()
		answered := len(member.times("sent", "SIP/2.0 200 OK"))
		busy := startSIPpServer(t, b.tp, "phone", nsPhone, "uac_call_long.xml", "-p", "5073", "-inf", busyCSV, "-m", "1", "-d", "3000", nsBoxLAN+":5060")
		busy.waitMessage(mode+": the member's own call", "SIP/2.0 200 OK", 5*time.Second)
		held := got(caller)
		_, done := b.call(t, "uac_parked.xml", "1900", "-d", "1000")
		if _, ok := d.poll(10*time.Second, func(api.Status) bool {
			calls, _ := d.api.Calls(t.Context())
			return slices.ContainsFunc(calls, func(c api.Call) bool { return c.State == "queued" })
		}); !ok {
			t.Fatalf("%s: the group call was not queued", mode)
		}
		if _, ok := d.poll(5*time.Second, func(api.Status) bool { return got(caller) >= held+25 }); !ok {
			t.Fatalf("%s: the queued caller heard %d packets of music in 5 s", mode, got(caller)-held)
		}
		select {
		case err := <-busy.done:
			busy.done <- err
			if err != nil {
				t.Fatalf("%s: the member's own call: %v", mode, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the member's own call did not end", mode)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: the queued call: %v", mode, err)
		}
		if n := len(member.times("sent", "SIP/2.0 200 OK")); n < answered+2 {
			t.Errorf("%s: the member answered %d calls, want its own and the queued one", mode, n-answered)
		}
		var recs []api.CDR
		if _, ok := d.poll(10*time.Second, func(api.Status) bool {
			recs, _ = d.api.CDRs(t.Context(), since, 0)
			return len(recs) >= 3
		}); !ok {
			t.Fatalf("%s: CDRs %+v, want the member's call, the queued call and its bridge", mode, recs)
		}
		var group, bridge bool
		for _, r := range recs {
			group = group || r.Dialled == "1900" && r.Disposition == "transferred"
			bridge = bridge || r.Dialled == "user0002" && r.Caller == "user0000" && r.Disposition == "answered"
		}
		if !group || !bridge {
			t.Errorf("%s: CDRs %+v, want 1900's call transferred and user0000's bridge to user0002 answered", mode, recs)
		}
	}
	b.inBothModes(d, queued)
	d.stop()
}
