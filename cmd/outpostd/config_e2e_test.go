package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// outpostctl runs the real CLI against d and returns its stdout.
func (d *daemon) ctl(args ...string) (string, error) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(binaries(d.t), "outpostctl"), append([]string{"--socket", filepath.Join(d.dir, "outpostd.sock")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// TestEmbeddedDefault: an empty data directory and no --config runs the
// embedded default, standalone on loopback, and says how to register.
func TestEmbeddedDefault(t *testing.T) {
	// The embedded default binds fixed ports on 127.0.0.1 (SIP 5060, the
	// status page 8080): run it in a namespace of its own, whose loopback
	// no other process (make run, say) shares.
	ns := netnstest.New(t).NS("box")
	d := startDaemonIn(t, ns, t.TempDir(), "")
	s := d.status()
	if s.Mode != "standalone" || s.ConfigVersion != 1 || s.ConfigSource != "default" {
		t.Fatalf("status %+v", s)
	}
	if s.StatusPage != "127.0.0.1:8080" || s.StatusPageError != "" {
		t.Errorf("status page %q (error %q), want 127.0.0.1:8080", s.StatusPage, s.StatusPageError)
	}
	for _, l := range s.Listeners {
		if !strings.Contains(l, ":127.0.0.1:") {
			t.Fatalf("default listener %s is not on loopback", l)
		}
	}
	out, err := d.ctl("status")
	if err != nil || !strings.Contains(out, "standalone") {
		t.Fatalf("outpostctl status: %v\n%s", err, out)
	}
	d.stop()
	if log := d.log.String(); !strings.Contains(log, "EMBEDDED DEFAULT") || !strings.Contains(log, "1001") {
		t.Fatalf("the log does not say how to register a softphone:\n%s", log)
	}
}

// TestConfigLifecycle: apply (refused whole with field paths, dry run,
// accepted), get (redacted), history, rollback, removed user's bindings,
// through the CLI and the API.
func TestConfigLifecycle(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	d := startDaemon(t, dir, writeJSON(t, filepath.Join(tmp, "v1.json"), benchDoc(3, loopbackListen, nil)))
	if v := d.status().ConfigVersion; v != 1 {
		t.Fatalf("first version %d", v)
	}

	// An invalid document: every error with its path, nothing applied.
	bad := benchDoc(3, loopbackListen, func(doc map[string]any) {
		users := doc["users"].([]map[string]any)
		users[2]["extension"] = users[0]["extension"]
		doc["sip"].(map[string]any)["listen"] = []string{"udp:127.0.0.1:99999"}
		doc["dialplan"] = []map[string]any{{"match": "([", "route": "local"}, {"match": "^1$", "route": "moon"}}
	})
	out, err := d.ctl("config", "apply", writeJSON(t, filepath.Join(tmp, "bad.json"), bad))
	if err == nil {
		t.Fatalf("invalid document accepted:\n%s", out)
	}
	for _, want := range []string{"422", "users[2].extension", "sip.listen[0]", "dialplan[0].match", "dialplan[1].route"} {
		if !strings.Contains(out, want) {
			t.Errorf("refusal lacks %q:\n%s", want, out)
		}
	}
	if v := d.status().ConfigVersion; v != 1 {
		t.Fatalf("a refused document changed the version to %d", v)
	}

	// A valid document with one user fewer: dry run first, then for real.
	v2 := benchDoc(2, loopbackListen, nil)
	v2path := writeJSON(t, filepath.Join(tmp, "v2.json"), v2)
	// The dry run says what would change (user0002 goes), secrets never shown.
	if out, err := d.ctl("config", "apply", v2path, "--dry-run"); err != nil || !strings.Contains(out, "nothing applied") ||
		!strings.Contains(out, "- users[user0002].extension") || strings.Contains(out, "ha1_md5: \"") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if v := d.status().ConfigVersion; v != 1 {
		t.Fatalf("dry run applied: version %d", v)
	}
	// A stale If-Match is refused (412).
	if out, err := d.ctl("config", "apply", v2path, "--if-match", "7"); err == nil || !strings.Contains(out, "412") {
		t.Fatalf("stale If-Match: %v\n%s", err, out)
	}
	out, err = d.ctl("--json", "config", "apply", v2path, "--if-match", "1")
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	var res api.ApplyResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Version.Version != 2 {
		t.Fatalf("apply result %q: %v", out, err)
	}

	// config get is redacted: no password, no HA1.
	out, err = d.ctl("config", "get")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"pw0000", "pw0001", "ha1"} {
		if strings.Contains(out, secret) {
			t.Fatalf("config get prints %q:\n%s", secret, out)
		}
	}
	// The secrets read "<redacted>", in both forms, as the box stores and
	// serves them (no HTML escaping on the way).
	js, err := d.ctl("config", "get", "--json")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{out, js} {
		if !strings.Contains(o, `"<redacted>"`) || strings.Contains(o, `\u003c`) {
			t.Fatalf("config get does not show \"<redacted>\" as it is:\n%s", o)
		}
	}
	// ... and can be applied back as is: the redacted passwords keep the
	// stored HA1s, so it is exactly the running document, and no new version.
	redacted := filepath.Join(tmp, "redacted.json")
	if err := os.WriteFile(redacted, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := d.ctl("config", "apply", redacted); err != nil || !strings.Contains(out, "unchanged") {
		t.Fatalf("re-applying the redacted document: %v\n%s", err, out)
	}
	// A real change to it is a new version.
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	doc["site"].(map[string]any)["name"] = "renamed"
	if out, err := d.ctl("config", "apply", writeJSON(t, filepath.Join(tmp, "renamed.json"), doc)); err != nil || !strings.Contains(out, "version 3") {
		t.Fatalf("applying a changed redacted document: %v\n%s", err, out)
	}

	out, err = d.ctl("--json", "config", "history")
	if err != nil {
		t.Fatal(err)
	}
	var hist []api.Version
	if err := json.Unmarshal([]byte(out), &hist); err != nil || len(hist) != 3 || !hist[0].Active || hist[0].Version != 3 {
		t.Fatalf("history %s: %v", out, err)
	}

	// Rollback to version 1 is a new version 4 with version 1's document.
	if out, err := d.ctl("config", "rollback", "1"); err != nil {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	s := d.status()
	if s.ConfigVersion != 4 || s.ConfigSource != "rollback:1" {
		t.Fatalf("after rollback: version %d source %s", s.ConfigVersion, s.ConfigSource)
	}
	c4, err := d.api.Config(t.Context(), 4)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := d.api.Config(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(c4.Document) != string(c1.Document) {
		t.Fatalf("rolled-back document differs:\n%s\n%s", c4.Document, c1.Document)
	}
	if _, err := d.api.Rollback(t.Context(), 99); !isStatus(err, 404) {
		t.Fatalf("rollback to a missing version: %v", err)
	}
	d.stop()
}

func isStatus(err error, code int) bool {
	var ae *api.APIError
	return errors.As(err, &ae) && ae.Status == code
}

// TestRouteExplained: outpostctl route names the rule, the rewritten
// number and where the call would go now, on the example branch document.
func TestRouteExplained(t *testing.T) {
	raw, err := os.ReadFile("../../examples/branch.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["sip"].(map[string]any)["listen"] = loopbackListen // the example binds 0.0.0.0:5060
	// The example's HQ (DNS at 198.18.1.2, MSR servers by name) is not
	// here: run the box in a namespace of its own, where those lookups fail
	// at once instead of leaving the machine, and keep it in normal mode
	// for the test (a pool that never resolves would make it survivable).
	doc["hq"].(map[string]any)["down_after"] = 1000
	ns := netnstest.New(t).NS("box")
	d := startDaemonIn(t, ns, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "branch.json"), doc))
	for _, c := range []struct {
		number, route, target, rule, target1 string
	}{
		{"89161234567", "pstn", "+79161234567", "national", "udp:198.18.3.2:5060 (fxo-1)"},
		{"112", "pstn", "112", "emergency", "udp:198.18.3.2:5060 (fxo-1)"},
		{"2001", "hq", "2001", "hq", "domain hq.example.com (RFC 3263, udp)"},
		{"1002", "local", "1002", "branch", ""}, // not registered: no target now
	} {
		out, err := d.ctl("--json", "route", c.number)
		if err != nil {
			t.Fatalf("route %s: %v\n%s", c.number, err, out)
		}
		var r api.RouteResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if !r.Routed || r.Route != c.route || r.Target != c.target || r.Rule != c.rule || r.Explain == "" {
			t.Errorf("route %s: %+v", c.number, r)
		}
		if first := append(r.Targets, "")[0]; first != c.target1 {
			t.Errorf("route %s: first target %q, want %q", c.number, first, c.target1)
		}
	}
	if out, err := d.ctl("route", "999"); err != nil || !strings.Contains(out, "no") {
		t.Errorf("unroutable number: %v\n%s", err, out)
	}
	d.stop()
}

// TestMetrics: GET /metrics speaks the Prometheus text format and follows
// the registrar and the config version.
func TestMetrics(t *testing.T) {
	needSIPp(t)
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), benchDoc(10, loopbackListen, nil)))
	if out, err := sipp(t, "reg_auth.xml", d.listener("udp"), usersCSV(t, 10, rightPassword, 3600), 10, 100); err != nil {
		t.Fatalf("sipp: %v\n%s", err, tail(out, 2000))
	}
	body, ct := d.metrics()
	for _, want := range []string{
		"outpost_registrar_bindings 10",
		"outpost_registrar_registered_total 10",
		"outpost_registrar_challenges_total 10",
		"outpost_config_version 1",
		`outpost_mode{mode="standalone"} 1`,
		`outpost_build_info{version="dev"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	d.stop()
}

// TestLiveApplyUsers: a pushed document takes effect without a restart:
// a removed user's bindings go and it is refused, a new user registers at
// once, everyone else stays registered.
func TestLiveApplyUsers(t *testing.T) {
	needSIPp(t)
	tmp := t.TempDir()
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(tmp, "v1.json"), benchDoc(10, loopbackListen, nil)))
	udp := d.listener("udp")
	if out, err := sipp(t, "reg_auth.xml", udp, usersCSV(t, 10, rightPassword, 3600), 10, 100); err != nil {
		t.Fatalf("sipp: %v\n%s", err, tail(out, 2000))
	}
	// Users 5..9 removed, user 10 added (benchDoc(11) minus 5..9).
	doc := benchDoc(11, loopbackListen, nil)
	users := doc["users"].([]map[string]any)
	doc["users"] = append(users[:5:5], users[10])
	if out, err := d.ctl("config", "apply", writeJSON(t, filepath.Join(tmp, "v2.json"), doc)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if s := d.status(); s.Bindings != 5 || s.ConfigVersion != 2 {
		t.Fatalf("after removing 5 users: %d bindings, version %d", s.Bindings, s.ConfigVersion)
	}
	if d.listener("udp") != udp {
		t.Fatal("an unchanged listener was rebound")
	}
	// user0010 registers at once; user0007 (removed) is refused with its old password.
	csv := filepath.Join(tmp, "new.csv")
	if err := os.WriteFile(csv, []byte("SEQUENTIAL\nuser0010;[authentication username=user0010 password=pw0010];3600\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "reg_auth.xml", udp, csv, 1, 10); err != nil {
		t.Fatalf("new user: %v\n%s", err, tail(out, 2000))
	}
	gone := filepath.Join(tmp, "gone.csv")
	if err := os.WriteFile(gone, []byte("SEQUENTIAL\nuser0007;[authentication username=user0007 password=pw0007];3600\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sipp(t, "reg_wrong.xml", udp, gone, 1, 10); err != nil {
		t.Fatalf("removed user (expects 403): %v\n%s", err, tail(out, 2000))
	}
	if s := d.status(); s.Bindings != 6 {
		t.Fatalf("%d bindings, want 6", s.Bindings)
	}
	d.stop()
}

// TestFactoryDocument: --factory is the document of a box's first start;
// once HQ has pushed another, a restart with the same --factory keeps the
// pushed one (the firmware image passes --factory on every boot).
func TestFactoryDocument(t *testing.T) {
	dir := t.TempDir()
	factory := benchDoc(2, loopbackListen, func(m map[string]any) { m["site"].(map[string]any)["name"] = "factory" })
	ff := writeJSON(t, filepath.Join(t.TempDir(), "factory.json"), factory)
	d := startDaemonArgs(t, "", dir, "--factory", ff)
	if s := d.status(); s.Site != "factory" || s.ConfigVersion != 1 || !strings.HasPrefix(s.ConfigSource, "factory:") {
		t.Fatalf("first start: site %q version %d source %q", s.Site, s.ConfigVersion, s.ConfigSource)
	}
	pushed := benchDoc(2, loopbackListen, func(m map[string]any) { m["site"].(map[string]any)["name"] = "from-hq" })
	if out, err := d.ctl("config", "apply", writeJSON(t, filepath.Join(t.TempDir(), "hq.json"), pushed)); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	d.stop()
	d = startDaemonArgs(t, "", dir, "--factory", ff)
	if s := d.status(); s.Site != "from-hq" || s.ConfigVersion != 2 {
		t.Fatalf("after a reboot with --factory: site %q version %d, want HQ's version 2", s.Site, s.ConfigVersion)
	}
	d.stop()
}
