package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// TestHuntGroupAcrossAWANCut rings a sequential hunt group from a SIPp
// phone in the branch's namespaces, in normal mode and again after the
// WAN is cut: the first member refuses (486), the second answers, and
// the CDR names the group and that member. With the second member gone
// silent, the group's overflow to an HQ extension goes out over the
// PSTN gateway, translated, with a Diversion naming the group.
func TestHuntGroupAcrossAWANCut(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")
	doc := benchDoc(3, []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060", "udp:" + nsBoxPSTN + ":5060"}, func(m map[string]any) {
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^(user\d{4}|7\d{3})$`, "route": "local"},
			{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{nsHQ + ":5060"}, "options_interval_ms": 300,
			"down_after": 2, "up_after": 2, "hold_s": 2, "pstn_prefix": "+7843555"}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": nsPSTN + ":5060"}}}
		m["groups"] = []map[string]any{{"extension": "7000", "members": []string{"user0001", "user0002"},
			"strategy": "sequential", "ring_s": 5, "overflow": "2001"}}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	d.waitFor("normal mode", 15*time.Second, func(s api.Status) bool { return s.Mode == "normal" })
	b.registerPhone(t, "user0001", "5071")
	startSIPpServer(t, b.tp, "phone", nsPhone, "uas_486.xml", "-p", "5071")
	b.registerPhone(t, "user0002", "5072")
	second := startSIPpServer(t, b.tp, "phone", nsPhone, "uas_answer_each.xml", "-p", "5072")

	groupCall := func(mode string) {
		t.Helper()
		since := time.Now()
		_, done := b.call(t, "uac_call.xml", "7000")
		if err := <-done; err != nil {
			t.Fatalf("%s: call to the group: %v", mode, err)
		}
		var recs []api.CDR
		if _, ok := d.poll(10*time.Second, func(api.Status) bool {
			recs, _ = d.api.CDRs(t.Context(), since, 0)
			return len(recs) > 0
		}); !ok {
			t.Fatalf("%s: no CDR for the group call", mode)
		}
		if r := recs[len(recs)-1]; r.Dialled != "7000" || r.Routed != "user0002" || r.Disposition != "answered" || r.Mode != mode {
			t.Errorf("%s: CDR %+v, want 7000 answered by user0002", mode, r)
		}
	}
	groupCall("normal")

	b.tp.Down("box", "wan0")
	d.waitFor("survivable after the WAN cut", 10*time.Second, func(s api.Status) bool { return s.Mode == "survivable" })
	groupCall("survivable")

	second.stop() // user0002 stays registered and answers nothing
	pstn := startSIPpServer(t, b.tp, "pstn", nsPSTN, "uas_answer_each.xml")
	_, done := b.call(t, "uac_forwarded.xml", "7000")
	if err := <-done; err != nil {
		t.Fatalf("overflow over the PSTN: %v", err)
	}
	pstn.waitMessage("the overflow at the PSTN gateway", "INVITE sip:+78435552001@", 5*time.Second)
	if msgs := pstn.messages(); !strings.Contains(msgs, "<sip:7000@") {
		t.Errorf("the overflow's INVITE has no Diversion naming the group:\n%s", tail(msgs, 2000))
	}
	d.stop()
}
