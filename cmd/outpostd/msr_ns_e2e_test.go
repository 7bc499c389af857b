package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// TestMSRInNamespaces: with msr enabled the box registers each of its
// interfaces at the softswitch (a SIPp registrar in the hq namespace) from
// the service interface, outpostctl interfaces shows the UAs, taking an
// interface down unregisters it; another media server's MSR REGISTER to the
// box lands in outpostctl media-resources; the site matrix prints.
func TestMSRInNamespaces(t *testing.T) {
	needSIPp(t)
	b := newBranch(t)
	ss := startSIPpServer(t, b.tp, "hq", nsHQ, "hq.xml", "-deadcall_wait", "1000")
	doc := benchDoc(2, []string{"udp:" + nsBoxLAN + ":5060", "udp:" + nsBoxWAN + ":5060"}, func(m map[string]any) {
		m["site"].(map[string]any)["zone"] = "kzn"
		m["site"].(map[string]any)["site"] = "branch1"
		m["wan"] = map[string]any{"interface": "wan0"}
		m["msr"] = map[string]any{"enabled": true, "name": "branch1-msr", "servers": []string{nsHQ + ":5060"},
			"interfaces": []string{"lan0", "wan0"}, "register_interval_s": 60, "retry_interval_s": 60, "control_port": 5700}
		m["media_resources"] = map[string]any{"matrix": map[string]any{"branch1": map[string]any{"branch1": 0, "branch2": 10}},
			"performance": map[string]any{"msr-b": 0.9}}
	})
	d := startDaemonIn(t, b.box, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))

	// One REGISTER per interface, all from the service (WAN) address; the
	// service UA alone carries the control channel.
	ss.waitMessage("REGISTER for lan0", "P-Eltex-MSR-Iface-Name: lan0", 10*time.Second)
	ss.waitMessage("REGISTER for wan0", "P-Eltex-MSR-Iface-Name: wan0", 10*time.Second)
	msgs := ss.messages()
	for _, want := range []string{
		"REGISTER sip:branch1-msr", "<sip:lan0;1@branch1-msr>", "<sip:wan0;1@branch1-msr>",
		"P-Eltex-MSR-Iface-Addr: " + nsBoxLAN, "P-Eltex-MSR-CC-Addr: " + nsBoxWAN, "P-Eltex-MSR-CC-Port: 5700",
		"Via: SIP/2.0/UDP " + nsBoxWAN,
	} {
		if !strings.Contains(msgs, want) {
			t.Errorf("softswitch did not see %q", want)
		}
	}
	if strings.Contains(msgs, "Via: SIP/2.0/UDP "+nsBoxLAN) {
		t.Error("a REGISTER left from the LAN address, not the service interface")
	}
	ifs := waitInterfaces(t, d, func(i api.Interfaces) bool { return countRegistered(i) == 2 })
	if ifs.ControlChannel == nil || !strings.HasSuffix(ifs.ControlChannel.Listen, ":5700") {
		t.Errorf("control channel: %+v", ifs.ControlChannel)
	}
	if out, err := d.ctl("interfaces"); err != nil || !strings.Contains(out, "sip:lan0;1@branch1-msr") || !strings.Contains(out, "wan0") {
		t.Errorf("outpostctl interfaces: %v\n%s", err, out)
	}

	// Another MSR registers a resource at the box.
	csv := filepath.Join(t.TempDir(), "msr.csv")
	if err := os.WriteFile(csv, []byte("SEQUENTIAL\neth7;[authentication username=msr password=mediaserver];msr-b;40;kzn;branch2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sippIn(t, b.tp.NS("phone"), "msr_reg.xml", nsBoxLAN+":5060", csv, 1, 1, "-i", nsPhone); err != nil {
		t.Fatalf("MSR REGISTER to the box: %v\n%s", err, tail(out, 2000))
	}
	out, err := d.ctl("media-resources")
	if err != nil || !strings.Contains(out, "msr-b") || !strings.Contains(out, nsPhone) || !strings.Contains(out, "branch2") {
		t.Errorf("media-resources after an MSR REGISTER: %v\n%s", err, out)
	}
	if out, err := d.ctl("media-resources", "matrix"); err != nil || !strings.Contains(out, "branch1") || !strings.Contains(out, "10") {
		t.Errorf("media-resources matrix: %v\n%s", err, out)
	}
	// HQ places msr-b in this box's site: the table shows the assigned
	// site in place of the one its REGISTER declared, the zone it kept.
	doc["media_resources"].(map[string]any)["placement"] = []map[string]any{{"msr": "msr-b", "site": "branch1"}}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.api.Apply(t.Context(), raw, "test", 0, false); err != nil {
		t.Fatalf("push with media_resources.placement: %v", err)
	}
	m, err := d.api.MediaResources(t.Context())
	if i := slices.IndexFunc(m.Resources, func(r api.MediaResource) bool { return r.MSR == "msr-b" }); err != nil || i < 0 ||
		m.Resources[i].Site != "branch1" || m.Resources[i].Zone != "kzn" {
		t.Errorf("msr-b after HQ placed it in branch1: %+v %v", m.Resources, err)
	}
	// Wrong MSR credentials are refused.
	bad := filepath.Join(t.TempDir(), "bad.csv")
	os.WriteFile(bad, []byte("SEQUENTIAL\neth8;[authentication username=msr password=nope];msr-c;10;kzn;branch2\n"), 0o600)
	if out, err := sippIn(t, b.tp.NS("phone"), "msr_reg.xml", nsBoxLAN+":5060", bad, 1, 1, "-i", nsPhone); err == nil {
		t.Errorf("an MSR REGISTER with a wrong password was accepted:\n%s", tail(out, 1000))
	}
	// lan0 goes down: its UA is unregistered (Expires: 0).
	b.tp.Down("box", "lan0")
	ss.waitMessage("unREGISTER of lan0", "Expires: 0", 10*time.Second)
	waitInterfaces(t, d, func(i api.Interfaces) bool { return countRegistered(i) == 1 })

	d.stop()
}

func countRegistered(i api.Interfaces) int {
	n := 0
	for _, u := range i.MSR {
		if u.Registered {
			n++
		}
	}
	return n
}

func waitInterfaces(t *testing.T, d *daemon, cond func(api.Interfaces) bool) api.Interfaces {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		i, err := d.api.Interfaces(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if cond(i) {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatalf("interfaces: condition not reached within 10 s: %+v", i)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
