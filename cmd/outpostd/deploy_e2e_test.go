package main

// Tests of what deploy/ ships for operators: the Prometheus rules and the
// Grafana dashboard are checked by promtool and against the metrics a real
// outpostd exports; the Ansible playbook pushes a document to real boxes
// over mutual TLS. promtool (Debian package prometheus) and ansible-playbook
// (ansible-core) are installed by make test (scripts/test-deps.sh).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/internal/testenv"
)

// deployPath is a file of deploy/ (the tests run in cmd/outpostd).
func deployPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "deploy", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// promtoolCheckRules runs promtool check rules on file.
func promtoolCheckRules(t *testing.T, promtool, file string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtool, "check", "rules", file).CombinedOutput()
	return string(out), err
}

// metricRef is an outpost metric name in PromQL: the identifier is the
// only place "outpost_" appears in the shipped expressions (label values
// and strings do not use it).
var metricRef = regexp.MustCompile(`\boutpost_[a-z0-9_]+`)

// exportedMetrics parses Prometheus text: the families (# TYPE) with their
// types, and every sample name.
func exportedMetrics(text string) (types map[string]string, samples map[string]bool) {
	types, samples = map[string]string{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			samples[line[:i]] = true
		}
	}
	return types, samples
}

// missingMetrics returns the names used in exprs that the box does not
// export: a name is exported when a sample of it was scraped, or when it
// is a histogram's or summary's _bucket/_sum/_count series of a family the
// box exports.
func missingMetrics(exprs []string, types map[string]string, samples map[string]bool) (used, missing []string) {
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, name := range metricRef.FindAllString(e, -1) {
			if seen[name] {
				continue
			}
			seen[name] = true
			used = append(used, name)
			ok := samples[name]
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(name, suf); cut && !ok {
					typ := types[base]
					ok = typ == "histogram" || (typ == "summary" && suf != "_bucket")
				}
			}
			if !ok {
				missing = append(missing, name)
			}
		}
	}
	slices.Sort(used)
	slices.Sort(missing)
	return used, missing
}

// ruleExprs returns the expr of every rule of a rules file: a one-line
// expr or a block scalar (expr: | followed by more-indented lines).
func ruleExprs(t *testing.T, file string) (exprs []string, rules int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "- alert:") || strings.HasPrefix(l, "- record:") {
			rules++
		}
		v, ok := strings.CutPrefix(l, "expr:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v != "" && !strings.ContainsAny(v[:1], "|>") {
			exprs = append(exprs, strings.Trim(v, `'"`))
			continue
		}
		var block []string
		for in := indent(lines[i]); i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || indent(lines[i+1]) > in); i++ {
			block = append(block, lines[i+1])
		}
		exprs = append(exprs, strings.Join(block, "\n"))
	}
	return exprs, rules
}

// grafanaPanel is what the lint reads of a dashboard panel.
type grafanaPanel struct {
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	Targets    []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// lintDashboard checks the dashboard's structure and returns the
// expressions of its panels.
func lintDashboard(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Inputs []struct {
			Name, Type, PluginID string
		} `json:"__inputs"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: not valid JSON: %v", file, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard without title or uid")
	}
	if !slices.ContainsFunc(d.Inputs, func(i struct{ Name, Type, PluginID string }) bool {
		return i.Name == "DS_PROMETHEUS" && i.PluginID == "prometheus"
	}) {
		t.Errorf("no __inputs entry DS_PROMETHEUS (prometheus)")
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for _, v := range []string{"DS_PROMETHEUS", "site", "instance"} {
		if vars[v] == "" {
			t.Errorf("no template variable %q (have %v)", v, vars)
		}
	}
	var exprs []string
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			name := fmt.Sprintf("panel %q (%s)", p.Title, p.Type)
			if strings.TrimSpace(p.Title) == "" {
				t.Errorf("%s: no title", name)
			}
			if uid, _ := p.Datasource["uid"].(string); uid != "${DS_PROMETHEUS}" {
				t.Errorf("%s: datasource %v, want uid ${DS_PROMETHEUS}", name, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no query", name)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: query %s has no expression", name, tg.RefID)
				}
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	return exprs
}

// grafanaVars stands in for the dashboard's variables so that promtool can
// parse its expressions.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"${site}", ".*", "$site", ".*", "${instance}", ".*", "$instance", ".*")

// TestDeployRulesAndDashboard: promtool accepts the alerting rules and
// their unit tests pass (outpost-rules.test.yml), and promtool parses every
// expression of the dashboard; the dashboard has a title and a query
// in every panel; and every outpost metric that the rules or the dashboard
// use is exported by a running outpostd (one with management, an HQ target
// and an ended call, so that the labelled families have samples).
func TestDeployRulesAndDashboard(t *testing.T) {
	promtool := testenv.NeedTool(t, "promtool")
	rulesFile := deployPath(t, "prometheus/outpost-rules.yml")
	if out, err := promtoolCheckRules(t, promtool, rulesFile); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	// Which alert fires when, with what labels and annotations.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	unit := exec.CommandContext(ctx, promtool, "test", "rules", "outpost-rules.test.yml")
	unit.Dir = filepath.Dir(rulesFile)
	if out, err := unit.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules outpost-rules.test.yml: %v\n%s", err, out)
	}
	ruleX, rules := ruleExprs(t, rulesFile)
	if rules < 6 || len(ruleX) != rules {
		t.Fatalf("%s: %d rules, %d expressions read", rulesFile, rules, len(ruleX))
	}

	dashX := lintDashboard(t, deployPath(t, "grafana/outpost.json"))
	if len(dashX) < 15 {
		t.Fatalf("dashboard: only %d queries", len(dashX))
	}
	// The dashboard's PromQL, as recording rules, through promtool's parser.
	var rf strings.Builder
	rf.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashX {
		q, _ := json.Marshal(grafanaVars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&rf, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	dashRules := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(dashRules, []byte(rf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := promtoolCheckRules(t, promtool, dashRules); err != nil {
		t.Fatalf("the dashboard's queries do not parse: %v\n%s", err, out)
	}

	// A box that exports every family: management on (certificate expiry),
	// a dead HQ target (target health and RTT), a PSTN gateway whose call to
	// an unregistered user's DID ends unreachable (calls by route).
	// The gateway stand-in's socket is bound first: a trunk is trusted
	// only from its configured address and port.
	gwConn, err := net.ListenPacket("udp", "127.0.0.79:0")
	if err != nil {
		t.Fatal(err)
	}
	defer gwConn.Close()
	gw := gwConn.LocalAddr().String()
	hq := newLabPKI(t, "HQ lab CA")
	doc := benchDoc(2, loopbackListen, func(m map[string]any) {
		m["management"] = hq.management(t, "127.0.0.1:0")
		m["hq"] = map[string]any{"targets": []string{"127.0.0.80:9"}, "options_interval_ms": 200}
		m["users"].([]map[string]any)[1]["did"] = "+78435550001"
		m["inbound"] = []map[string]any{{"match": `^\+7843555(\d{4})$`, "to": "user$1"}}
		m["pstn"] = map[string]any{"gateways": []map[string]any{{"name": "fxo", "target": gw}}}
	})
	d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(t.TempDir(), "cfg.json"), doc))
	if code := rawInboundCall(t, gwConn, d.listener("udp"), "+78435550001"); code < 400 {
		t.Fatalf("the inbound call to an unregistered user's DID: final %d, want a failure", code)
	}
	var text string
	deadline := time.Now().Add(10 * time.Second)
	for {
		text, _ = d.metrics()
		if strings.Contains(text, "outpost_calls_total{") && strings.Contains(text, "outpost_hq_target_up{") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the CDR writer's batch and the first probe; no event to wait on
	}
	types, samples := exportedMetrics(text)

	for what, exprs := range map[string][]string{"rules": ruleX, "dashboard": dashX} {
		used, missing := missingMetrics(exprs, types, samples)
		if len(used) < 5 {
			t.Errorf("%s: only %d outpost metrics found in the expressions: %v", what, len(used), used)
		}
		if len(missing) > 0 {
			t.Errorf("%s use metrics the box does not export: %v\nexported:\n%s", what, missing, grepLines(text, "outpost_"))
		}
	}
	// The check can fail: a misspelled name, and a histogram suffix of a
	// family that is no histogram.
	if _, missing := missingMetrics([]string{`rate(outpost_registrar_registerd_total[5m])`, `outpost_config_version_count`}, types, samples); len(missing) != 2 {
		t.Errorf("misspelled metrics not caught: %v", missing)
	}
	if !samples["outpost_management_cert_expiry_timestamp_seconds"] || !samples["outpost_site_info"] {
		t.Errorf("no certificate expiry or site info:\n%s", grepLines(text, "outpost_"))
	}
	d.stop()
}

// rawInboundCall sends an INVITE for did from pc, the PSTN gateway's
// socket (trusted by address and port: no digest), to the box's UDP
// listener, ACKs the final response and returns its code.
func rawInboundCall(t *testing.T, pc net.PacketConn, box, did string) int {
	t.Helper()
	gwIP := pc.LocalAddr().(*net.UDPAddr).IP.String()
	dst, err := net.ResolveUDPAddr("udp", box)
	if err != nil {
		t.Fatal(err)
	}
	local := pc.LocalAddr().String()
	branch := fmt.Sprintf("z9hG4bK-deploy-%d", time.Now().UnixNano())
	callID := branch + "@" + gwIP
	sdp := "v=0\r\no=- 1 1 IN IP4 " + gwIP + "\r\ns=-\r\nc=IN IP4 " + gwIP + "\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
	head := func(method string, cseqBody string, toTag string) string {
		to := "<sip:" + did + "@bench.local>"
		if toTag != "" {
			to += ";tag=" + toTag
		}
		return method + " sip:" + did + "@" + box + " SIP/2.0\r\nVia: SIP/2.0/UDP " + local + ";branch=" + branch + "\r\n" +
			"Max-Forwards: 70\r\nFrom: <sip:+74950000000@bench.local>;tag=deploy\r\nTo: " + to + "\r\n" +
			"Call-ID: " + callID + "\r\nCSeq: 1 " + cseqBody + "\r\n"
	}
	invite := head("INVITE", "INVITE", "") + "Contact: <sip:+74950000000@" + local + ">\r\nContent-Type: application/sdp\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(sdp), sdp)
	buf := make([]byte, 65535)
	deadline := time.Now().Add(20 * time.Second)
	provisional := false
	for time.Now().Before(deadline) {
		if !provisional {
			if _, err := pc.WriteTo([]byte(invite), dst); err != nil {
				t.Fatal(err)
			}
		}
		pc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			continue // retransmit (Timer A) until a provisional response
		}
		msg := string(buf[:n])
		var code int
		if _, err := fmt.Sscanf(msg, "SIP/2.0 %d", &code); err != nil || !strings.Contains(msg, branch) {
			continue // a request (OPTIONS probe) or another transaction
		}
		if code < 200 {
			provisional = true
			continue
		}
		toTag := ""
		if m := regexp.MustCompile(`(?mi)^(?:To|t):.*;tag=([^;>\s]+)`).FindStringSubmatch(msg); m != nil {
			toTag = m[1]
		}
		if _, err := pc.WriteTo([]byte(head("ACK", "ACK", toTag)+"Content-Length: 0\r\n\r\n"), dst); err != nil {
			t.Fatal(err)
		}
		return code
	}
	t.Fatalf("no final response to the INVITE from %s within 20 s", gwIP)
	return 0
}

// TestDeployAnsiblePush: deploy/ansible/push.yml pushes a document to two
// real boxes over mutual TLS and reports a dead third one as failed
// without stopping the others; then an invalid document is refused with
// its field errors and changes nothing.
func TestDeployAnsiblePush(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs ansible-playbook against real boxes (make test runs it)")
	}
	playbook := testenv.NeedTool(t, "ansible-playbook")
	hq := newLabPKI(t, "HQ lab CA")
	tmp := t.TempDir()
	var boxes []*daemon
	var inv strings.Builder
	inv.WriteString("[outpost]\n")
	for i := range 2 {
		doc := benchDoc(3, loopbackListen, func(m map[string]any) { m["management"] = hq.management(t, "127.0.0.1:0") })
		d := startDaemon(t, t.TempDir(), writeJSON(t, filepath.Join(tmp, fmt.Sprintf("box%d.json", i)), doc))
		boxes = append(boxes, d)
		host, port, err := net.SplitHostPort(d.status().Management)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&inv, "box%d ansible_host=%s outpost_port=%s\n", i, host, port)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := dead.Addr().(*net.TCPAddr).Port
	dead.Close() // nobody listens there now
	fmt.Fprintf(&inv, "deadbox ansible_host=127.0.0.1 outpost_port=%d\n", deadPort)
	invFile := filepath.Join(tmp, "inventory.ini")
	if err := os.WriteFile(invFile, []byte(inv.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	home := t.TempDir()
	run := func(doc string, extra ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		args := append([]string{"-i", invFile, deployPath(t, "ansible/push.yml"), "-e", "doc=" + doc,
			"-e", "outpost_client_cert=" + hq.hqCert, "-e", "outpost_client_key=" + hq.hqKey, "-e", "outpost_ca=" + hq.caPEM,
			"-e", "outpost_timeout=10"}, extra...)
		cmd := exec.CommandContext(ctx, playbook, args...)
		cmd.Dir = tmp
		// Local only: no SSH, no facts, no galaxy, nothing written to ~.
		cmd.Env = append(os.Environ(), "HOME="+home, "ANSIBLE_HOME="+filepath.Join(home, ".ansible"),
			"ANSIBLE_LOCAL_TEMP="+filepath.Join(home, "tmp"), "ANSIBLE_REMOTE_TEMP="+filepath.Join(home, "rtmp"),
			"ANSIBLE_CONNECTION=local", "ANSIBLE_GATHERING=explicit", "ANSIBLE_NOCOLOR=1", "ANSIBLE_FORCE_COLOR=0",
			"ANSIBLE_RETRY_FILES_ENABLED=0", "ANSIBLE_PYTHON_INTERPRETER=auto_silent", "ANSIBLE_STDOUT_CALLBACK=default",
			"ANSIBLE_LOAD_CALLBACK_PLUGINS=0", "ANSIBLE_CONFIG="+filepath.Join(home, "none.cfg"),
			"ANSIBLE_LOCALHOST_WARNING=0", "ANSIBLE_INVENTORY_UNPARSED_WARNING=0", "ANSIBLE_DEPRECATION_WARNINGS=0")
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("ansible-playbook did not finish within 3 minutes:\n%s", tail(string(out), 8000))
		}
		return string(out), err
	}

	newDoc := benchDoc(5, loopbackListen, func(m map[string]any) { m["management"] = hq.management(t, "127.0.0.1:0") })
	newDoc["site"].(map[string]any)["name"] = "pushed-by-ansible"
	out, err := run(writeJSON(t, filepath.Join(tmp, "new.json"), newDoc))
	if err == nil {
		t.Fatalf("ansible-playbook with a dead box exited 0:\n%s", out)
	}
	for _, want := range []string{
		"outpost push: box0 version 1 -> 2 (applied)",
		"outpost push: box1 version 1 -> 2 (applied)",
		"outpost push: deadbox FAILED (Get the box's status)",
		`+ users[user0003].extension: \"user0003\"`, // the dry run's diff (JSON-quoted by debug)
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the play's output has no %q", want)
		}
	}
	recap := regexp.MustCompile(`(?m)^(box0|box1|deadbox)\s*:.*failed=(\d+)`).FindAllStringSubmatch(out, -1)
	fails := map[string]string{}
	for _, m := range recap {
		fails[m[1]] = m[2]
	}
	if fails["box0"] != "0" || fails["box1"] != "0" || fails["deadbox"] != "1" {
		t.Errorf("recap failed= per box: %v, want box0 0, box1 0, deadbox 1", fails)
	}
	for i, d := range boxes {
		if s := d.status(); s.ConfigVersion != 2 || s.Site != "pushed-by-ansible" {
			t.Errorf("box%d after the push: version %d, site %q", i, s.ConfigVersion, s.Site)
		}
	}
	if t.Failed() {
		t.Fatalf("ansible-playbook output:\n%s", tail(out, 12000))
	}

	// An invalid document: refused by the dry run with its field errors;
	// nothing applied.
	users := newDoc["users"].([]map[string]any)
	users[1]["extension"] = users[0]["extension"]
	out, err = run(writeJSON(t, filepath.Join(tmp, "bad.json"), newDoc), "--limit", "box0")
	if err == nil || !strings.Contains(out, "invalid document (HTTP 422)") || !strings.Contains(out, "users[1].extension") ||
		!strings.Contains(out, "outpost push: box0 FAILED") {
		t.Errorf("an invalid document: %v\n%s", err, tail(out, 12000))
	}
	if s := boxes[0].status(); s.ConfigVersion != 2 {
		t.Errorf("box0 after the refused push: version %d, want 2", s.ConfigVersion)
	}

	// The same document again: unchanged, no new version; a changed one
	// with outpost_dry_run: its diff, nothing applied.
	out, err = run(filepath.Join(tmp, "new.json"), "--limit", "box0")
	if err != nil || !strings.Contains(out, "outpost push: box0 version 2 unchanged") || !strings.Contains(out, "(no change)") {
		t.Errorf("the running document again: %v\n%s", err, tail(out, 12000))
	}
	fewer := benchDoc(3, loopbackListen, func(m map[string]any) { m["management"] = hq.management(t, "127.0.0.1:0") })
	fewer["site"].(map[string]any)["name"] = "pushed-by-ansible"
	out, err = run(writeJSON(t, filepath.Join(tmp, "fewer.json"), fewer), "--limit", "box1", "-e", "outpost_dry_run=true")
	if err != nil || !regexp.MustCompile(`outpost push: box1 version 2 \(dry run: [1-9]\d* diff lines\)`).MatchString(out) ||
		!strings.Contains(out, "- users[user0004]") {
		t.Errorf("a dry run: %v\n%s", err, tail(out, 12000))
	}
	for i, d := range boxes {
		if s := d.status(); s.ConfigVersion != 2 {
			t.Errorf("box%d after the dry runs: version %d, want 2", i, s.ConfigVersion)
		}
		d.stop()
	}
}
