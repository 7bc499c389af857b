package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// TestHQHealthProbes: the box probes its HQ target with OPTIONS; status and
// metrics show it up with a round-trip time while a SIPp stand-in answers,
// DOWN after down_after unanswered probes once it is gone, and up again
// after up_after answered ones when it is back.
func TestHQHealthProbes(t *testing.T) {
	needSIPp(t)
	const hq = "127.0.0.89"
	target := "udp:" + hq + ":5060"
	doc := benchDoc(1, loopbackListen, func(m map[string]any) {
		m["dialplan"] = []map[string]any{{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		m["hq"] = map[string]any{"targets": []string{hq + ":5060"}, "options_interval_ms": 200, "down_after": 2, "up_after": 2}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	hqTarget := func(s api.Status) (api.TargetHealth, bool) {
		for _, h := range s.HQ {
			if h.Target == target {
				return h, true
			}
		}
		return api.TargetHealth{}, false
	}

	stop := startSIPpServer(t, nil, "", hq, "uas_answer.xml").stop
	d.waitFor("HQ target up with a probe RTT", 10*time.Second, func(s api.Status) bool {
		h, ok := hqTarget(s)
		return ok && h.Up && h.LastRTTMs > 0
	})
	if m, _ := d.metrics(); !strings.Contains(m, `outpost_hq_target_up{target="`+target+`"} 1`) {
		t.Errorf("metrics do not show the target up:\n%s", grepLines(m, "hq_target"))
	}

	stop()
	s := d.waitFor("HQ target down", 10*time.Second, func(s api.Status) bool {
		h, ok := hqTarget(s)
		return ok && !h.Up
	})
	if h, _ := hqTarget(s); h.Reason != "probes failed" || h.ConsecutiveFail < 2 {
		t.Errorf("down target: %+v, want reason \"probes failed\" after >= 2 failures", h)
	}
	if m, _ := d.metrics(); !strings.Contains(m, `outpost_hq_target_up{target="`+target+`"} 0`) {
		t.Errorf("metrics do not show the target down:\n%s", grepLines(m, "hq_target"))
	}
	if out, err := d.ctl("status"); err != nil || !strings.Contains(out, target+" DOWN (probes failed") {
		t.Errorf("outpostctl status does not show the target down: %v\n%s", err, out)
	}

	startSIPpServer(t, nil, "", hq, "uas_answer.xml")
	s = d.waitFor("HQ target up again", 10*time.Second, func(s api.Status) bool {
		h, ok := hqTarget(s)
		return ok && h.Up
	})
	if h, _ := hqTarget(s); h.Reason != "probes ok" {
		t.Errorf("recovered target: %+v, want reason \"probes ok\"", h)
	}
	d.stop()
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
