package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// TestDNDAndForwardingFromThePhone sets do-not-disturb and forwards with
// feature codes from SIPp phones through the real daemon, and checks what
// calls then do: in normal mode a forward to an HQ extension goes to HQ,
// in survivable mode (HQ silent) over the PSTN gateway with the HQ
// number's translation; the phones' settings survive a restart.
func TestDNDAndForwardingFromThePhone(t *testing.T) {
	needSIPp(t)
	// Not 127.0.0.1, where the phones are: HQ's and the gateway's
	// addresses are trusted trunks.
	const hq, gw = "127.0.0.82", "127.0.0.81"
	doc := benchDoc(0, loopbackListen, func(m map[string]any) {
		var users []map[string]any
		for _, u := range []string{"1000", "1001", "1002"} {
			users = append(users, map[string]any{"extension": u, "password": "pw" + u})
		}
		m["users"] = users
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^1\d{3}$`, "route": "local"},
			{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{hq + ":5060"}, "options_interval_ms": 200,
			"down_after": 2, "up_after": 1, "hold_s": 1, "pstn_prefix": "+7843555"}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": gw + ":5060"}}}
	})
	// HQ answers probes, and one call (then it is gone: the box turns
	// survivable).
	atHQ := runUAS(t, "uas_answer.xml", hq, "5060", "-aa")
	dir, cfg := t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc)
	d := startDaemon(t, dir, cfg)
	udp := d.listener("udp")
	d.waitFor("normal mode", 15*time.Second, func(s api.Status) bool { return s.Mode == "normal" })

	dial := func(scenario, user, number string) {
		t.Helper()
		csv := filepath.Join(t.TempDir(), "caller.csv")
		line := "SEQUENTIAL\n" + user + ";[authentication username=" + user + " password=pw" + user + "];0;" + number + "\n"
		if err := os.WriteFile(csv, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := sipp(t, scenario, udp, csv, 1, 1); err != nil {
			t.Fatalf("%s dials %s (%s): %v\n%s", user, number, scenario, err, tail(out, 3000))
		}
	}
	services := func() string {
		t.Helper()
		out, err := d.ctl("services")
		if err != nil {
			t.Fatalf("outpostctl services: %v\n%s", err, out)
		}
		return out
	}
	row := func(out, ext string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == ext {
				return f
			}
		}
		return nil
	}

	// 1001 is registered at a port where nothing answers: a call that
	// rang it would end 408/480, not 486.
	registerSilent(t, udp, "1001")
	dial("uac_feature.xml", "1001", "*78")
	if r := row(services(), "1001"); len(r) < 6 || r[1] != "on" || r[5] != "dnd" {
		t.Fatalf("services after *78: %q, want 1001 with DND on, set from the phone", r)
	}
	dial("uac_busy.xml", "1000", "1001")

	// Forward always to a local user.
	dial("uac_feature.xml", "1001", "*79")
	dial("uac_feature.xml", "1001", "*721002")
	answered := answeringPhoneWith(t, udp, "1002", "pw1002", "uas_answer.xml")
	dial("uac_forwarded.xml", "1000", "1001")
	answered()

	// Forward to an HQ extension: to HQ in normal mode...
	dial("uac_feature.xml", "1001", "*722001")
	dial("uac_forwarded.xml", "1000", "1001")
	atHQ()
	// ... and, with HQ gone, over the PSTN with the HQ number translated.
	d.waitFor("survivable once HQ stops answering", 15*time.Second, func(s api.Status) bool { return s.Mode == "survivable" })
	trace := filepath.Join(t.TempDir(), "pstn.log")
	atPSTN := runUAS(t, "uas_answer.xml", gw, "5060", "-aa", "-trace_msg", "-message_file", trace)
	dial("uac_forwarded.xml", "1000", "1001")
	atPSTN()
	if b, _ := os.ReadFile(trace); !strings.Contains(string(b), "INVITE sip:+78435552001@") ||
		!strings.Contains(string(b), "reason=unconditional") {
		t.Errorf("the PSTN gateway did not get the forward as +78435552001 with a Diversion:\n%s", tail(string(b), 2000))
	}

	// The phone's setting outlives the daemon.
	d.stop()
	d = startDaemon(t, dir, cfg)
	if r := row(services(), "1001"); len(r) < 6 || r[2] != "2001" || r[5] != "forward_always" {
		t.Errorf("services after a restart: %q, want 1001 forwarding always to 2001, set from the phone", r)
	}
	d.stop()
}

// TestDelegationWithSIPp calls a boss whose phone does not answer and
// gets the delegate, then has the delegate call as the boss with *33:
// the callee's INVITE shows the boss in From and P-Asserted-Identity.
func TestDelegationWithSIPp(t *testing.T) {
	needSIPp(t)
	doc := benchDoc(0, loopbackListen, func(m map[string]any) {
		m["users"] = []map[string]any{{"extension": "1000", "password": "pw1000"}, {"extension": "1001", "password": "pw1001"},
			{"extension": "1002", "password": "pw1002", "name": "Anna Boss", "delegates": map[string]any{"users": []string{"1003"}}},
			{"extension": "1003", "password": "pw1003"}}
		m["dialplan"] = []map[string]any{{"name": "local", "match": `^1\d{3}$`, "route": "local"}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	udp := d.listener("udp")
	call := func(user, number string) {
		t.Helper()
		csv := filepath.Join(t.TempDir(), "caller.csv")
		line := "SEQUENTIAL\n" + user + ";[authentication username=" + user + " password=pw" + user + "];0;" + number + "\n"
		if err := os.WriteFile(csv, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := sipp(t, "uac_call.xml", udp, csv, 1, 1); err != nil {
			t.Fatalf("%s calls %s: %v\n%s", user, number, err, tail(out, 3000))
		}
	}

	registerSilent(t, udp, "1002") // the boss's phone rings and never answers
	answered := answeringPhoneWith(t, udp, "1003", "pw1003", "uas_answer.xml")
	since := time.Now()
	call("1000", "1002")
	answered()
	var recs []api.CDR
	if _, ok := d.poll(10*time.Second, func(api.Status) bool {
		recs, _ = d.api.CDRs(t.Context(), since, 0)
		return len(recs) > 0
	}); !ok || recs[0].Dialled != "1002" || recs[0].Routed != "1003" {
		t.Errorf("CDRs %+v, want 1002's call answered by the delegate 1003", recs)
	}

	trace := filepath.Join(t.TempDir(), "callee.log")
	port := registerSilent(t, udp, "1001")
	callee := runUAS(t, "uas_answer.xml", "127.0.0.1", port, "-aa", "-trace_msg", "-message_file", trace)
	call("1003", "*331001")
	callee()
	b, _ := os.ReadFile(trace)
	if msgs := string(b); !strings.Contains(msgs, `From: "Anna Boss" <sip:1002@`) || !strings.Contains(msgs, `P-Asserted-Identity: "Anna Boss" <sip:1002@`) {
		t.Errorf("the callee did not see the boss:\n%s", tail(msgs, 2000))
	}
	d.stop()
}

// registerSilent registers user (password "pw"+user) with a Contact port
// on which nothing listens (yet), and returns the port.
func registerSilent(t *testing.T, registrar, user string) string {
	t.Helper()
	return registerAt(t, registrar, user, "pw"+user)
}
