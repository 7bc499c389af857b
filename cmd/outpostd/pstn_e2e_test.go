package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPSTNCallSkipsBlockedGateway: two SIPp PSTN gateways; the first
// answers 503. The first call fails over to the second gateway (the retry
// rule), which blocks the first; the second call goes straight to the
// second gateway. Status and metrics show the first blocked.
func TestPSTNCallSkipsBlockedGateway(t *testing.T) {
	needSIPp(t)
	const gw1, gw2 = "127.0.0.93", "127.0.0.94"
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "pstn", "match": `^9(\d+)$`, "route": "pstn", "strip": 1}}
		m["pstn"] = map[string]any{"gateways": []map[string]any{
			{"name": "refusing", "target": gw1 + ":5060"},
			{"name": "answering", "target": gw2 + ":5060"},
		}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	first := startSIPpServer(t, nil, "", gw1, "uas_503.xml")
	second := startSIPpServer(t, nil, "", gw2, "uas_answer_each.xml")
	caller := filepath.Join(t.TempDir(), "caller.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;90441234567\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for call := 1; call <= 2; call++ {
		if out, err := sipp(t, "uac_call.xml", d.listener("udp"), caller, 1, 1); err != nil {
			t.Fatalf("call %d: %v\n%s", call, err, tail(out, 3000))
		}
		if n := len(second.times("received", "INVITE sip:0441234567@")); n != call {
			t.Fatalf("call %d: the second gateway got %d INVITEs\n%s", call, n, tail(second.messages(), 2000))
		}
		if call == 1 {
			st := d.status()
			if len(st.PSTN) != 2 || st.PSTN[0].Name != "refusing" || st.PSTN[0].BlockedUntil.Before(time.Now()) ||
				!st.PSTN[1].BlockedUntil.IsZero() || !st.PSTN[1].Up {
				t.Fatalf("status after the 503: %+v", st.PSTN)
			}
			body, _ := d.metrics()
			for _, want := range []string{`outpost_pstn_gateway_up{gateway="refusing"} 0`, `outpost_pstn_gateway_up{gateway="answering"} 1`} {
				if !strings.Contains(body, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		}
	}
	if n := len(first.times("received", "INVITE ")); n != 1 {
		t.Errorf("the refusing gateway got %d INVITEs, want 1 (the second call skips it while blocked)\n%s", n, tail(first.messages(), 2000))
	}
	d.stop()
}

// TestRedirectedCallWithSIPp: the PSTN gateway answers 302 with a Contact
// elsewhere; the box calls that Contact, which answers: the call connects
// there.
func TestRedirectedCallWithSIPp(t *testing.T) {
	needSIPp(t)
	const gw, moved = "127.0.0.95", "127.0.0.96" // uas_302.xml names 127.0.0.96:5060
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "pstn", "match": `^9(\d+)$`, "route": "pstn", "strip": 1}}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "redirecting", "target": gw + ":5060"}}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	redirecting := startSIPpServer(t, nil, "", gw, "uas_302.xml")
	there := startSIPpServer(t, nil, "", moved, "uas_answer_each.xml")
	caller := filepath.Join(t.TempDir(), "caller.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;90441234567\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "uac_call.xml", d.listener("udp"), caller, 1, 1); err != nil {
		t.Fatalf("call: %v\n%s", err, tail(out, 3000))
	}
	// The box answers the caller's BYE and then sends its own to the
	// callee: the caller's SIPp may be done before that one is traced.
	there.waitMessage("the BYE at the redirect target", "BYE sip:", 5*time.Second)
	if len(redirecting.times("received", "INVITE sip:0441234567@")) != 1 {
		t.Errorf("the redirecting gateway did not get the INVITE\n%s", tail(redirecting.messages(), 2000))
	}
	if len(there.times("received", "INVITE sip:5550100@127.0.0.96")) != 1 || len(there.times("received", "BYE ")) != 1 {
		t.Errorf("the redirect target did not carry the call\n%s", tail(there.messages(), 2000))
	}
	d.stop()
}
