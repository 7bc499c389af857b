package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// survHQDoc is the branch document of the HQ survivability tests: two
// users, HQ extensions 2xxx routed to HQ (pstn_prefix +7843555 in
// survivable mode and for the per-call fallback), one PSTN gateway, the
// WAN watched on wan0, probes every 300 ms (down after 2, up after 2, hold
// 2 s). hq is merged into the hq section.
func survHQDoc(hq map[string]any) map[string]any {
	listen := []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060", "udp:" + nsBoxPSTN + ":5060"}
	return benchDoc(2, listen, func(m map[string]any) {
		m["wan"] = map[string]any{"interface": "wan0"}
		m["dialplan"] = []map[string]any{{"name": "hq", "match": `^2\d{3}$`, "route": "hq"}}
		sec := map[string]any{"options_interval_ms": 300, "down_after": 2, "up_after": 2, "hold_s": 2, "pstn_prefix": "+7843555"}
		for k, v := range hq {
			sec[k] = v
		}
		m["hq"] = sec
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": nsPSTN + ":5060"}}}
	})
}

// TestSurvivableBootOutage is item 1 of the HQ survivability issue: a box
// that boots while the WAN is silent (the ISP router / HQ drop everything:
// DNS unreachable, HQ never answered) or has no carrier goes survivable as
// a running box would, and the first call to an HQ extension reaches the
// PSTN gateway with pstn_prefix + extension within 6 s (silent) or 3 s (no
// carrier) of the box answering SIP.
func TestSurvivableBootOutage(t *testing.T) {
	needSIPp(t)
	for _, tc := range []struct {
		name   string
		cut    func(b *branch)
		within time.Duration
		reason string // of the transition to survivable
		figure string
	}{
		{"silent", func(b *branch) {
			// HQ (and its DNS) receive but every answer vanishes on the way
			// back: timeouts, not errors, as behind a dead upstream router.
			b.dnsInNS(t, "hq", nsHQ+":53")
			b.tp.Route("hq", "add", "blackhole", nsBoxWAN+"/32")
		}, 6 * time.Second, "all HQ targets down", "boot_outage_silent_first_call"},
		{"no carrier", func(b *branch) {
			b.tp.Down("hq", "wan0") // the box's wan0 stays up without carrier
		}, 3 * time.Second, "WAN carrier lost", "boot_outage_no_carrier_first_call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBranch(t)
			startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml")
			tc.cut(b)
			pstn := startSIPpServer(t, b.tp, "pstn", nsPSTN, "uas_answer.xml")
			doc := survHQDoc(map[string]any{"domain": nsHQDomain, "dns_servers": []string{nsHQ + ":53"}})
			d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
			// The admin socket answers once the SIP listeners are served.
			ready := time.Now()
			if s := d.status(); !slices.Contains(s.Listeners, "udp:"+nsBoxLAN+":5060") {
				t.Fatalf("listeners %v", s.Listeners)
			}
			_, done := b.call(t, "uac_call.xml", "2001")
			pstn.waitMessage("first HQ-extension call at the PSTN gateway", "INVITE sip:+78435552001@", tc.within+2*time.Second)
			if err := <-done; err != nil {
				t.Fatalf("first call after boot: %v", err)
			}
			ok, found := pstn.sentAt("SIP/2.0 200 OK")
			if !found {
				t.Fatalf("no 200 OK from the PSTN gateway:\n%s", tail(pstn.messages(), 2000))
			}
			figure(t, tc.figure, ok.Sub(ready))
			if ok.Sub(ready) > tc.within {
				t.Errorf("first call answered at the PSTN gateway %v after the box answered, want within %v", ok.Sub(ready), tc.within)
			}
			s := d.waitFor("survivable after booting into the outage", 5*time.Second, func(s api.Status) bool { return s.Mode == "survivable" })
			tr := s.Transitions[len(s.Transitions)-1]
			if tr.Reason != tc.reason {
				t.Errorf("transition %+v, want reason %q", tr, tc.reason)
			}
			figure(t, tc.figure+"_mode", tr.At.Sub(ready))
			if tc.name == "silent" && !slices.Contains(s.HQUnresolved, "primary "+nsHQDomain) {
				t.Errorf("status hq_unresolved %v, want the primary pool", s.HQUnresolved)
			}
			d.stop()
		})
	}
}

// TestHQCallFallback is item 2: in normal mode HQ answers its OPTIONS
// probes but refuses every INVITE with 503; the call goes out at once to
// the PSTN gateway with pstn_prefix + extension, the CDR says so, and the
// mode stays normal. With hq.call_fallback false the caller gets HQ's 503.
func TestHQCallFallback(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	hq := startSIPpServer(t, b.tp, "hq", nsHQ, "uas_503.xml")
	pstn := startSIPpServer(t, b.tp, "pstn", nsPSTN, "uas_answer.xml")
	target := "udp:" + nsHQ + ":5060"
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, cfg, survHQDoc(map[string]any{"targets": []string{nsHQ + ":5060"}})))
	d.waitFor("normal, HQ answering its probes", 10*time.Second, func(s api.Status) bool {
		return s.Mode == "normal" && len(s.HQ) == 1 && s.HQ[0].Target == target && s.HQ[0].Up && s.HQ[0].LastRTTMs > 0
	})

	_, done := b.call(t, "uac_call.xml", "2001")
	if err := <-done; err != nil {
		t.Fatalf("call to HQ refused with 503: %v", err)
	}
	hq.waitMessage("the call at HQ", "INVITE sip:2001@", time.Second)
	pstn.waitMessage("the fallback at the PSTN gateway", "INVITE sip:+78435552001@", time.Second)
	refused, ok1 := hq.sentAt("SIP/2.0 503")
	answered, ok2 := pstn.sentAt("SIP/2.0 200 OK")
	if !ok1 || !ok2 {
		t.Fatalf("no 503 at HQ or no 200 at the PSTN gateway:\n%s\n%s", tail(hq.messages(), 1000), tail(pstn.messages(), 1000))
	}
	figure(t, "hq_call_fallback", answered.Sub(refused))
	s := d.status()
	if s.Mode != "normal" || len(s.Transitions) != 1 {
		t.Errorf("mode %s, transitions %+v: the per-call fallback must not change the mode", s.Mode, s.Transitions)
	}
	// CDRs reach the store in batches: poll.
	var out string
	if _, ok := d.poll(5*time.Second, func(api.Status) bool {
		out, _ = d.ctl("cdr", "--json")
		return strings.Contains(out, "fallback from hq")
	}); !ok || !strings.Contains(out, "+78435552001") || !strings.Contains(out, "fallback from hq: "+target+": 503") ||
		!strings.Contains(out, `"route": "pstn"`) {
		t.Errorf("outpostctl cdr does not show the fallback:\n%s", out)
	}

	// hq.call_fallback false: HQ's answer is the caller's.
	doc := survHQDoc(map[string]any{"targets": []string{nsHQ + ":5060"}, "call_fallback": false})
	if out, err := d.ctl("config", "apply", writeJSON(t, cfg, doc)); err != nil {
		t.Fatalf("config apply: %v\n%s", err, out)
	}
	caller, done := b.call(t, "uac_call.xml", "2002")
	if err := <-done; err == nil || !strings.Contains(caller.messages(), "SIP/2.0 503") {
		t.Errorf("with call_fallback false the call got %v, want HQ's 503:\n%s", err, tail(caller.messages(), 1500))
	}
	if strings.Contains(pstn.messages(), "INVITE sip:+78435552002@") {
		t.Error("with call_fallback false the call still went to the PSTN")
	}
	d.stop()
}

// TestHQBackupPool is item 4: hq.backup is used only when the primary
// pool has failed — calls go to it while the primary is silent, and the
// box stays normal; it goes survivable only when both pools are down.
func TestHQBackupPool(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	const backupIP = "198.18.1.11"
	b.tp.Addr("hq", "wan0", backupIP+"/24")
	// The primary HQ is silent: its socket takes every request and answers none.
	silent := listenUDPIn(t, b.tp.Handle("hq"), nsHQ+":5060")
	t.Cleanup(func() { silent.Close() })
	backup := startSIPpServer(t, b.tp, "hq", backupIP, "hq.xml")
	primaryT, backupT := "udp:"+nsHQ+":5060", "udp:"+backupIP+":5060"
	doc := survHQDoc(map[string]any{"targets": []string{nsHQ + ":5060"}, "backup": map[string]any{"targets": []string{backupIP + ":5060"}}})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	health := func(s api.Status, target string) (api.TargetHealth, bool) {
		for _, h := range s.HQ {
			if h.Target == target {
				return h, true
			}
		}
		return api.TargetHealth{}, false
	}
	d.waitFor("primary down, backup up", 10*time.Second, func(s api.Status) bool {
		p, ok1 := health(s, primaryT)
		bk, ok2 := health(s, backupT)
		return ok1 && ok2 && !p.Up && bk.Up
	})
	if s := d.status(); s.Mode != "normal" {
		t.Fatalf("mode %s with the backup pool up, want normal: %+v", s.Mode, s.Transitions)
	}

	_, done := b.call(t, "uac_call.xml", "2001")
	if err := <-done; err != nil {
		t.Fatalf("call with the primary silent: %v", err)
	}
	backup.waitMessage("the call at the backup pool", "INVITE sip:2001@"+backupIP, time.Second)

	// Both pools down: survivable.
	backup.stop()
	s := d.waitFor("survivable with both pools down", 10*time.Second, func(s api.Status) bool { return s.Mode == "survivable" })
	if tr := s.Transitions[len(s.Transitions)-1]; tr.Reason != "all HQ targets down" {
		t.Errorf("transition %+v, want all HQ targets down", tr)
	}
	d.stop()
}
