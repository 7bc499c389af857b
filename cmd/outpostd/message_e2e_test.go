package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInstantMessageWithSIPp: a phone's MESSAGE is challenged like a
// call, then delivered to the addressee's registered phone (SIPp checks
// the text, its type and the sender) and answered 200; a message for a
// user with no registered phone is answered 480.
func TestInstantMessageWithSIPp(t *testing.T) {
	needSIPp(t)
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
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
	send("uac_message_480.xml", "user0002")
	d.stop()
}
