package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// TestInstantMessageWithSIPp: a phone's MESSAGE is challenged like a
// call, then delivered to the addressee's registered phone (SIPp checks
// the text, its type and the sender) and answered 200; one for an HQ
// user goes to HQ (a SIPp there checks it the same way). A message for a
// user with no registered phone is kept (202), survives a restart of the
// box, and reaches the user's phone when it registers.
func TestInstantMessageWithSIPp(t *testing.T) {
	needSIPp(t)
	const hq = "127.0.0.84" // not 127.0.0.1, where the phones are: HQ's address is trusted
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"},
			{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{hq + ":5060"}}
	})
	atHQ := runUAS(t, "uas_message.xml", hq, "5060", "-aa") // up before the box probes it
	dir, cfg := t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc)
	d := startDaemon(t, dir, cfg)
	udp := d.listener("udp")
	received := answeringPhoneWith(t, udp, "user0001", "pw0001", "uas_message.xml")
	send := func(scenario, to string) {
		t.Helper()
		csv := filepath.Join(t.TempDir(), "sender.csv")
		if err := os.WriteFile(csv, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;"+to+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := sipp(t, scenario, udp, csv, 1, 1); err != nil {
			t.Fatalf("message to %s: %v\n%s", to, err, tail(out, 3000))
		}
	}
	send("uac_message_200.xml", "user0001")
	received()
	d.waitFor("HQ answering probes in normal mode", 30*time.Second, func(s api.Status) bool {
		return s.Mode == "normal" && len(s.HQ) == 1 && s.HQ[0].Up && s.HQ[0].ConsecutiveOK > 0
	})
	send("uac_message_200.xml", "2001")
	atHQ()

	send("uac_message_202.xml", "user0002")
	d.stop()
	d = startDaemon(t, dir, cfg)
	answeringPhoneWith(t, d.listener("udp"), "user0002", "pw0002", "uas_message.xml")()
	d.stop()
}
