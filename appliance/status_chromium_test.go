package appliance

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/internal/testenv"
	"github.com/outpost/outpost/mode"
)

var screenshots = flag.Bool("screenshots", false, "write the status page screenshots into ../docs/")

// chromium finds a Chromium for headless tests, or skips (fails in CI)
// saying there is none: make test-deps installs Debian's chromium as root.
func chromium(t *testing.T) string {
	t.Helper()
	return testenv.NeedTool(t, "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
}

// headless runs chromium on url with args (--dump-dom, --screenshot=…)
// and returns its standard output. The page's scripts run until they have
// been idle for the virtual time budget: enough for the first polls.
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=4000"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// hqStandIn answers OPTIONS with 200 while answering is set: the box's
// only HQ target, whose silence makes the box survivable.
type hqStandIn struct {
	pc        net.PacketConn
	answering atomic.Bool
}

func newHQStandIn(t *testing.T) *hqStandIn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hqStandIn{pc: pc}
	h.answering.Store(true)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 8192)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			msg := string(buf[:n])
			if strings.HasPrefix(msg, "OPTIONS ") && h.answering.Load() {
				pc.WriteTo([]byte(sipResponse(msg, "200 OK")), from)
			}
		}
	}()
	return h
}

// sipResponse answers the request msg (wire text) with status and no body.
func sipResponse(msg, status string) string {
	var b strings.Builder
	b.WriteString("SIP/2.0 " + status + "\r\n")
	for _, line := range strings.Split(msg, "\r\n") {
		name, _, _ := strings.Cut(line, ":")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "via", "v", "from", "f", "call-id", "i", "cseq":
			b.WriteString(line + "\r\n")
		case "to", "t":
			if !strings.Contains(line, "tag=") {
				line += ";tag=hq1"
			}
			b.WriteString(line + "\r\n")
		}
	}
	b.WriteString("Content-Length: 0\r\n\r\n")
	return b.String()
}

// ringingPhone is a phone that rings and never answers. It answers CANCEL
// and BYE with 200. (The registrar reaches a phone at the registration's
// source, here sipgo's client socket, so the box may not reach this one:
// the call is then in progress while the box tries, and ends in 480.)
func ringingPhone(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 8192)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			msg := string(buf[:n])
			switch {
			case strings.HasPrefix(msg, "INVITE "):
				pc.WriteTo([]byte(sipResponse(msg, "180 Ringing")), from)
			case strings.HasPrefix(msg, "CANCEL "), strings.HasPrefix(msg, "BYE "), strings.HasPrefix(msg, "OPTIONS "):
				pc.WriteTo([]byte(sipResponse(msg, "200 OK")), from)
			}
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// hasCDR reports whether the call's CDR is in the store.
func hasCDR(t *testing.T, a *App, callID string) bool {
	t.Helper()
	recs, err := a.st.CDRs(t.Context(), time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.CallID == callID {
			return true
		}
	}
	return false
}

// callFromHQ sends an INVITE for extension from the HQ stand-in's socket
// (an HQ target's address: admitted without a challenge).
func callFromHQ(t *testing.T, hq *hqStandIn, box, extension, id string) {
	t.Helper()
	dst, err := net.ResolveUDPAddr("udp", box)
	if err != nil {
		t.Fatal(err)
	}
	local := hq.pc.LocalAddr().String()
	msg := fmt.Sprintf("INVITE sip:%[1]s@%[2]s SIP/2.0\r\n"+
		"Via: SIP/2.0/UDP %[3]s;branch=z9hG4bK-%[4]s\r\n"+
		"Max-Forwards: 70\r\nFrom: <sip:2001@hq.example.com>;tag=%[4]s\r\nTo: <sip:%[1]s@%[2]s>\r\n"+
		"Call-ID: %[4]s@test\r\nCSeq: 1 INVITE\r\nContact: <sip:2001@%[3]s>\r\nContent-Length: 0\r\n\r\n",
		extension, box, local, id)
	if _, err := hq.pc.WriteTo([]byte(msg), dst); err != nil {
		t.Fatal(err)
	}
}

// registerPhone registers user from a phone with the given User-Agent.
func registerPhone(t *testing.T, box, user, password, userAgent string, contactPort int) {
	t.Helper()
	if code := registerAs(t, box, user, password, userAgent, contactPort, 600); code != sip.StatusOK {
		t.Fatalf("REGISTER %s: %d", user, code)
	}
}

func waitMode(t *testing.T, a *App, want mode.Mode) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for a.mode.Mode() != want {
		if time.Now().After(deadline) {
			t.Fatalf("mode %s after 15 s, want %s", a.mode.Mode(), want)
		}
		time.Sleep(50 * time.Millisecond) // polling a state another goroutine drives
	}
}

// TestStatusPageInChromium opens the status page in headless Chromium with
// an admin's credentials in the URL (real Basic auth: Chromium answers the
// challenge with them and reuses them for the page's API polls) and checks
// the rendered DOM: the mode in normal and in survivable mode (the only HQ
// target falls silent), the registered phones with their user agents, the
// HQ target's health and the mode timeline. Without credentials the page
// shows nothing of the box. With -screenshots it writes
// docs/status-normal.png, docs/status-survivable.png (1200x900) and
// docs/status-phone.png (390x844).
func TestStatusPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts headless Chromium several times")
	}
	bin := chromium(t)
	hq := newHQStandIn(t)
	d := testDoc(t)
	d["site"].(map[string]any)["name"] = "kazan-branch"
	d["hq"] = map[string]any{"targets": []any{hq.pc.LocalAddr().String()}, "options_interval_ms": 200,
		"down_after": 1, "up_after": 1, "hold_s": 1}
	d["dialplan"] = append(d["dialplan"].([]any), map[string]any{"name": "hq", "match": `^2\d{3}$`, "route": "hq"})
	a := startApp(t, encode(t, d))
	waitMode(t, a, mode.Normal)
	box := udpListener(t, a)
	phones := []struct{ user, pw, ua string }{
		{"1001", "demo1001", "Yealink SIP-T54W 96.86.0.70"},
		{"1002", "demo1002", "Grandstream GXP2170 1.0.11.64"},
		{"1003", "demo1003", "Linphone Android/5.2.5"},
	}
	for i, p := range phones {
		port := 5990 + i // never contacted: the phones' own sockets do not exist
		if p.user == "1002" {
			port = ringingPhone(t)
		}
		registerPhone(t, box, p.user, p.pw, p.ua, port)
	}
	// A call from HQ to 1002: the box rings the phone at its registration's
	// source (a socket registerAs has closed) and gives up after a few
	// seconds. The page is read once the call's CDR is written: whether the
	// call was still in progress when Chromium (seconds to start) loaded
	// the page, or ended and not yet in the CDRs (written each second), was
	// a race the test lost when Chromium took as long as the call.
	calls := 0
	called := func(id string) {
		t.Helper()
		callFromHQ(t, hq, box, "1002", id)
		calls++
		deadline := time.Now().Add(15 * time.Second)
		for !hasCDR(t, a, id+"@test") || len(a.gw.Calls()) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("call %s from HQ to 1002: no CDR 15 s later (calls in progress %+v)", id, a.gw.Calls())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	called("call-normal")
	url := "http://1001:demo1001@" + a.status.Addr() + "/"
	docs := filepath.Join("..", "docs")

	// Without credentials: the challenge, nothing of the box.
	if dom := headless(t, bin, "http://"+a.status.Addr()+"/", "--dump-dom"); strings.Contains(dom, "Yealink") || strings.Contains(dom, "mode-card") {
		t.Fatalf("the page shows the box without credentials:\n%s", dom)
	}

	checkDOM := func(dom string, m mode.Mode) {
		t.Helper()
		modeText := regexp.MustCompile(`id="mode" class="mode-value">([^<]*)<`).FindStringSubmatch(dom)
		if modeText == nil || modeText[1] != string(m) {
			t.Errorf("mode on the page %v, want %s", modeText, m)
		}
		// Every call from HQ so far (caller 2001) is in the CDRs.
		if n := strings.Count(dom, `<td class="mono">2001</td>`); n < calls {
			t.Errorf("%s: %d calls from HQ in the CDRs on the page, want %d", m, n, calls)
		}
		for _, want := range append([]string{`id="reg-count" class="count">3<`, "kazan-branch", hq.pc.LocalAddr().String(), "conn ok"},
			phones[0].ua, phones[1].ua, phones[2].ua, `<td class="mono">1003</td>`) {
			if !strings.Contains(dom, want) {
				t.Errorf("%s: the page lacks %q", m, want)
			}
		}
		if t.Failed() {
			t.Fatalf("DOM in %s mode:\n%s", m, dom)
		}
	}
	checkDOM(headless(t, bin, url, "--dump-dom"), mode.Normal)

	hq.answering.Store(false) // the WAN dies silently
	waitMode(t, a, mode.Survivable)
	called("call-survivable")
	dom := headless(t, bin, url, "--dump-dom")
	checkDOM(dom, mode.Survivable)
	if !strings.Contains(dom, "normal → survivable") || !strings.Contains(dom, `class="down">down<`) {
		t.Errorf("the survivable page lacks the transition or the dead target:\n%s", dom)
	}
	if *screenshots {
		headless(t, bin, url, "--screenshot="+filepath.Join(docs, "status-survivable.png"), "--window-size=1200,900")
		headless(t, bin, url, "--screenshot="+filepath.Join(docs, "status-phone.png"), "--window-size=390,844")
	}

	hq.answering.Store(true) // back: failback after hold_s
	waitMode(t, a, mode.Normal)
	called("call-failback")
	dom = headless(t, bin, url, "--dump-dom")
	checkDOM(dom, mode.Normal)
	if !strings.Contains(dom, "survivable → normal") {
		t.Errorf("the timeline lacks the failback:\n%s", dom)
	}
	if *screenshots {
		headless(t, bin, url, "--screenshot="+filepath.Join(docs, "status-normal.png"), "--window-size=1200,900")
		for _, f := range []string{"status-normal.png", "status-survivable.png", "status-phone.png"} {
			if fi, err := os.Stat(filepath.Join(docs, f)); err != nil || fi.Size() == 0 {
				t.Errorf("screenshot %s: %v", f, err)
			} else {
				fmt.Printf("wrote docs/%s (%d bytes)\n", f, fi.Size())
			}
		}
	}
}
