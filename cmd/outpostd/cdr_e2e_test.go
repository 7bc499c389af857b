package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// TestCDR: every call leaves one record in SQLite — an answered local call
// and a call to a user nobody registered as — with the times, numbers,
// route, final code and disposition; outpostctl cdr shows them, --since
// filters, and they survive a restart.
func TestCDR(t *testing.T) {
	needSIPp(t)
	dir := t.TempDir()
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^user\d{4}$`, "route": "local"}}
	})
	cfg := writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc)
	d := startDaemon(t, dir, cfg)
	udp := d.listener("udp")
	before := time.Now()

	answered := answeringPhone(t, udp, "user0001", "pw0001")
	caller := filepath.Join(t.TempDir(), "caller.csv")
	os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;user0001\n"), 0o600)
	if out, err := sipp(t, "uac_call.xml", udp, caller, 1, 1); err != nil {
		t.Fatalf("caller: %v\n%s", err, tail(out, 3000))
	}
	answered()
	// user0002 has no contact: 480, unreachable.
	os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;user0002\n"), 0o600)
	if out, err := sipp(t, "uac_call.xml", udp, caller, 1, 1); err == nil || !strings.Contains(out, "SIP/2.0 480 ") {
		t.Fatalf("call to an unregistered user: %v\n%s", err, tail(out, 2000))
	}

	// The writer flushes within a second.
	var recs []api.CDR
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := d.ctl("--json", "cdr", "--since", before.UTC().Format(time.RFC3339Nano))
		if err != nil {
			t.Fatalf("outpostctl cdr: %v\n%s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatalf("cdr --json: %v\n%s", err, out)
		}
		if len(recs) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the writer's batch period; no event to wait on from outside
	}
	if len(recs) != 2 {
		all, _ := d.ctl("cdr")
		t.Fatalf("want 2 records, got %+v\nall: %s", recs, all)
	}
	ok, failed := recs[0], recs[1]
	if ok.Caller != "user0000" || ok.Dialled != "user0001" || ok.Route != "local" || ok.Code != 200 ||
		ok.Disposition != "answered" || ok.Answered.IsZero() || !ok.Ended.After(ok.Answered) || ok.Mode != "standalone" ||
		ok.Hangup != "caller" || ok.DurationS <= 0 {
		t.Errorf("answered call record: %+v", ok)
	}
	if failed.Dialled != "user0002" || failed.Code != 480 || failed.Disposition != "unreachable" || !failed.Answered.IsZero() {
		t.Errorf("unreachable call record: %+v", failed)
	}
	if out, err := d.ctl("cdr", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); err != nil || strings.Contains(out, "user0001") {
		t.Errorf("cdr --since the future: %v\n%s", err, out)
	}
	d.stop()

	d = startDaemon(t, dir, cfg)
	if out, err := d.ctl("cdr"); err != nil || !strings.Contains(out, "answered") || !strings.Contains(out, "unreachable") {
		t.Errorf("records after a restart: %v\n%s", err, out)
	}
	d.stop()
}
