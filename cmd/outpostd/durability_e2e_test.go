package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestKillDuringPush kills outpostd with SIGKILL at random moments while a
// document is being pushed, many times: after each restart the box runs
// either the old or the new version, intact, with a contiguous history and
// exactly one active version.
func TestKillDuringPush(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	d := startDaemon(t, dir, writeJSON(t, filepath.Join(tmp, "v1.json"), benchDoc(500, loopbackListen, nil)))
	rng := rand.New(rand.NewPCG(1, 2))
	landed := 0
	const rounds = 12
	for round := range rounds {
		before := d.status().ConfigVersion
		doc := benchDoc(500, loopbackListen, func(m map[string]any) { m["site"].(map[string]any)["name"] = fmt.Sprintf("push-%d", round) })
		raw, _ := json.Marshal(doc)
		pushed := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := d.api.Apply(ctx, raw, "test", 0, false)
			pushed <- err
		}()
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond) // a random moment of the push: the point of the test
		d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.done // cmd.Wait returned: the startDaemon cleanup sees the process gone
		<-pushed

		d = startDaemon(t, dir, "")
		s := d.status()
		if s.ConfigVersion != before && s.ConfigVersion != before+1 {
			t.Fatalf("round %d: version %d after the kill, want %d or %d", round, s.ConfigVersion, before, before+1)
		}
		cr, err := d.api.Config(t.Context(), 0)
		if err != nil {
			t.Fatalf("round %d: config get: %v", round, err)
		}
		var got map[string]any
		if err := json.Unmarshal(cr.Document, &got); err != nil {
			t.Fatalf("round %d: stored document does not parse: %v", round, err)
		}
		wantSite := fmt.Sprintf("push-%d", round)
		if s.ConfigVersion == before+1 {
			landed++
			if got["site"].(map[string]any)["name"] != wantSite {
				t.Fatalf("round %d: new version holds site %v, want %s", round, got["site"], wantSite)
			}
		}
		hist, err := d.api.History(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		for i, v := range hist {
			if v.Version != s.ConfigVersion-int64(i) {
				t.Fatalf("round %d: history not contiguous: %+v", round, hist)
			}
			if v.Active {
				active++
			}
		}
		if active != 1 || !hist[0].Active {
			t.Fatalf("round %d: %d active versions: %+v", round, active, hist)
		}
	}
	t.Logf("%d of %d pushes landed before the kill", landed, rounds)
	d.stop()
}
