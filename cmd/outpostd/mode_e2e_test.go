package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// TestSurvivableOnHQProbes: when every HQ target fails down_after OPTIONS
// probes the box goes survivable (status, metrics, transition with its
// reason), a call to an HQ extension then goes out through the PSTN
// gateway as pstn_prefix + extension, and once HQ answers again the box
// returns to normal after the hold.
func TestSurvivableOnHQProbes(t *testing.T) {
	needSIPp(t)
	const hq, pstn = "127.0.0.89", "127.0.0.78"
	doc := benchDoc(3, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{hq + ":5060"}, "options_interval_ms": 200, "down_after": 2,
			"up_after": 2, "hold_s": 1, "pstn_prefix": "+7843555"}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": pstn + ":5060"}}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	stop := startSIPpServer(t, nil, "", hq, "uas_answer.xml").stop
	d.waitFor("normal mode with HQ answering probes", 10*time.Second, func(s api.Status) bool {
		return s.Mode == "normal" && len(s.HQ) == 1 && s.HQ[0].Up && s.HQ[0].LastRTTMs > 0
	})
	before := len(d.status().Transitions)

	stop() // HQ goes silent
	s := d.waitFor("survivable mode", 10*time.Second, func(s api.Status) bool { return s.Mode == "survivable" })
	last := s.Transitions[len(s.Transitions)-1]
	if len(s.Transitions) != before+1 || last.From != "normal" || last.To != "survivable" ||
		!strings.Contains(last.Reason, "HQ") || !strings.Contains(last.Detail, hq) {
		t.Errorf("transition to survivable: %+v (want normal -> survivable naming HQ)", last)
	}
	if m, _ := d.metrics(); !strings.Contains(m, `outpost_mode{mode="survivable"} 1`) ||
		!strings.Contains(m, `outpost_mode_transitions_total{to="survivable"}`) {
		t.Errorf("metrics do not show survivable mode:\n%s", grepLines(m, "outpost_mode"))
	}
	if out, err := d.ctl("route", "2001"); err != nil || !strings.Contains(out, "+78435552001") || !strings.Contains(out, "pstn") {
		t.Errorf("route 2001 in survivable mode: %v\n%s", err, out)
	}

	// The call to 2001 is answered at the PSTN gateway stand-in.
	answered := answerOne(t, pstn, "5060")
	caller := filepath.Join(t.TempDir(), "caller.csv")
	if err := os.WriteFile(caller, []byte("SEQUENTIAL\nuser0000;[authentication username=user0000 password=pw0000];0;2001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "uac_call.xml", d.listener("udp"), caller, 1, 1); err != nil {
		t.Fatalf("survivable call to 2001: %v\n%s", err, tail(out, 3000))
	}
	answered()

	startSIPpServer(t, nil, "", hq, "uas_answer.xml") // HQ is back
	s = d.waitFor("normal mode after the hold", 15*time.Second, func(s api.Status) bool { return s.Mode == "normal" })
	last = s.Transitions[len(s.Transitions)-1]
	if last.From != "survivable" || last.To != "normal" {
		t.Errorf("failback transition: %+v", last)
	}
	var down, up time.Time
	for _, tr := range s.Transitions {
		switch tr.To {
		case "survivable":
			down = tr.At
		case "normal":
			up = tr.At
		}
	}
	if up.Sub(down) < time.Second {
		t.Errorf("failback %v after the cut: the 1 s hold was not honoured", up.Sub(down))
	}
	if out, err := d.ctl("route", "2001"); err != nil || !strings.Contains(out, "route\thq") && !strings.Contains(out, "hq ->") {
		t.Errorf("route 2001 after failback: %v\n%s", err, out)
	}
	d.stop()
}
