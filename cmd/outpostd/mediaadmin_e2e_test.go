package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMediaResourceFlagSurvivesRestart: an operator takes an MSR out of
// selection (the API outpostctl media-resources set uses); the flag is in
// the database, so the restarted daemon still holds it. Then HQ's document
// lists MSRs inactive itself: the box shows both lists, and putting the
// MSR the document lists back in service on the box does not override HQ.
func TestMediaResourceFlagSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	doc := benchDoc(1, loopbackListen, func(m map[string]any) { m["msr"] = map[string]any{"name": "msr-branch"} })
	cfg := writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc)
	d := startDaemon(t, dir, cfg)
	if out, err := d.ctl("media-resources", "set", "msr-branch", "inactive"); err != nil || !strings.Contains(out, "kept across restarts") {
		t.Fatalf("outpostctl media-resources set msr-branch inactive: %v\n%s", err, out)
	}
	d.stop()

	d = startDaemon(t, dir, cfg)
	m, err := d.api.MediaResources(t.Context())
	if err != nil || !slices.Equal(m.AdminInactive, []string{"msr-branch"}) {
		t.Fatalf("after the restart: admin_inactive %v (%v), want [msr-branch]", m.AdminInactive, err)
	}
	if out, err := d.ctl("media-resources"); err != nil || !strings.Contains(out, "inactive on this box: msr-branch") {
		t.Errorf("outpostctl media-resources after the restart: %v\n%s", err, out)
	}

	doc["media_resources"] = map[string]any{"inactive": []string{"msr-branch", "msr-hq"}}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.api.Apply(t.Context(), raw, "test", 0, false); err != nil {
		t.Fatalf("push with media_resources.inactive: %v", err)
	}
	st, err := d.api.SetMediaResourceActive(t.Context(), "msr-branch", true)
	if err != nil || st.Active || !st.InactiveByDocument {
		t.Fatalf("set msr-branch active under the document's list: %+v %v; want still inactive, by the document", st, err)
	}
	m, err = d.api.MediaResources(t.Context())
	if err != nil || len(m.AdminInactive) != 0 || !slices.Equal(m.DocumentInactive, []string{"msr-branch", "msr-hq"}) {
		t.Fatalf("admin_inactive %v, document_inactive %v (%v); want none and [msr-branch msr-hq]", m.AdminInactive, m.DocumentInactive, err)
	}
	d.stop()
}
