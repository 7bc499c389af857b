package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/pki"
)

// testDoc is the embedded default on ephemeral loopback ports, as a map a
// test edits before pushing it.
func testDoc(t *testing.T) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(config.DefaultJSON(), &d); err != nil {
		t.Fatal(err)
	}
	d["sip"].(map[string]any)["listen"] = []any{"udp:127.0.0.1:0", "tcp:127.0.0.1:0"}
	d["status"] = map[string]any{"listen": "127.0.0.1:0"} // never the default's fixed 8080
	return d
}

func encode(t *testing.T, d map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startApp runs an appliance on doc in a fresh data directory until the
// test ends.
func startApp(t *testing.T, doc []byte) *App {
	t.Helper()
	dir := t.TempDir()
	file := dir + "/doc.json"
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("OUTPOST_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := New(ctx, Options{DataDir: dir, ConfigFile: file, Version: "test", Logger: log})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("appliance stopped with: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("appliance has not stopped 10 s after its context ended; goroutines:\n%s", goroutines())
		}
	})
	return a
}

// udpListener is the appliance's bound UDP SIP address.
func udpListener(t *testing.T, a *App) string {
	t.Helper()
	for _, l := range a.gw.Listeners() {
		if addr, ok := strings.CutPrefix(l, "udp:"); ok {
			return addr
		}
	}
	t.Fatalf("no UDP listener in %v", a.gw.Listeners())
	return ""
}

// register sends a REGISTER for user over UDP to box, answering the digest
// challenge with password, and returns the final status.
func register(t *testing.T, box, user, password string) int {
	t.Helper()
	return registerAs(t, box, user, password, "", 5999, 60)
}

// registerAs is register from a phone with a User-Agent ("" = sipgo's),
// a contact port and an expiry of its own.
func registerAs(t *testing.T, box, user, password, userAgent string, contactPort, expires int) int {
	t.Helper()
	var opts []sipgo.UserAgentOption
	if userAgent != "" {
		opts = append(opts, sipgo.WithUserAgent(userAgent))
	}
	ua, err := sipgo.NewUA(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ua.Close()
	cli, err := sipgo.NewClient(ua)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := sip.ParseAddr(box)
	req := sip.NewRequest(sip.REGISTER, sip.Uri{Scheme: "sip", Host: host, Port: port})
	aor := sip.Uri{Scheme: "sip", User: user, Host: "outpost.local"}
	req.AppendHeader(&sip.FromHeader{Address: aor, Params: sip.HeaderParams{{K: "tag", V: sip.GenerateTagN(8)}}})
	req.AppendHeader(&sip.ToHeader{Address: aor})
	req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: user, Host: "127.0.0.1", Port: contactPort}})
	req.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(expires)))
	if userAgent != "" {
		req.AppendHeader(sip.NewHeader("User-Agent", userAgent))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := cli.Do(ctx, req)
	if err == nil && res.StatusCode == sip.StatusUnauthorized {
		res, err = cli.DoDigestAuth(ctx, req, res, sipgo.DigestAuth{Username: user, Password: password})
	}
	if err != nil {
		t.Fatalf("REGISTER %s: %v", user, err)
	}
	return res.StatusCode
}

// bindTCP holds a loopback TCP port for the test: a listen address some
// part of a document will fail to bind.
func bindTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// snapshotOf is everything a refused push must leave as it was.
type snapshotOf struct {
	Version    int64
	Stored     int64
	Listeners  []string
	Management string
	Status     string
	Relay      string
	Mode       string
	MSRCtl     string
}

func snapshot(t *testing.T, a *App) snapshotOf {
	t.Helper()
	v, _, err := a.st.ActiveConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	relay, _ := json.Marshal(a.media.r.Config())
	return snapshotOf{Version: a.running().version.Version, Stored: v.Version, Listeners: a.gw.Listeners(),
		Management: a.mgmt.Addr(), Status: a.status.Addr(), Relay: string(relay), Mode: string(a.mode.Mode()),
		MSRCtl: a.msr.agent.Control().Listen.String()}
}

// TestApplyIsAllOrNothing pushes, for each part, a document that only that
// part refuses (it validates), together with a user change: user 1099
// added, 1003 removed. The refusal must name the part, and every part,
// the listeners, the users that can register and the stored version must
// be exactly as before. Then the user change alone is pushed and applies.
func TestApplyIsAllOrNothing(t *testing.T) {
	base := testDoc(t)
	a := startApp(t, encode(t, base))
	box := udpListener(t, a)
	sipPort, _ := strconv.Atoi(box[strings.LastIndexByte(box, ':')+1:])
	heldTCP := bindTCP(t)

	withUserChange := func(d map[string]any) map[string]any {
		users := d["users"].([]any)
		users = slices.DeleteFunc(users, func(u any) bool { return u.(map[string]any)["extension"] == "1003" })
		d["users"] = append(users, map[string]any{"extension": "1099", "password": "pw-1099"})
		return d
	}
	for _, tc := range []struct {
		part  string
		fault func(d map[string]any)
	}{
		{"gateway", func(d map[string]any) {
			// An address that is not the box's: the listener cannot bind.
			d["sip"].(map[string]any)["listen"] = []any{"udp:127.0.0.1:0", "tcp:127.0.0.1:0", "udp:198.51.100.7:5060"}
		}},
		{"media", func(d map[string]any) {
			// A range that holds the port the SIP listener got from the kernel.
			lo := max(1024, (sipPort-10)&^1)
			d["media"] = map[string]any{"port_min": lo, "port_max": lo + 40}
		}},
		{"msr", func(d map[string]any) {
			d["msr"] = map[string]any{"enabled": true, "name": "box", "servers": []any{"127.0.0.1:9"}, "service_interface": "nosuch0"}
		}},
		{"management", func(d map[string]any) {
			m := testManagement(t)
			m["listen"] = heldTCP // taken by another socket
			d["management"] = m
		}},
		{"status", func(d map[string]any) {
			d["status"] = map[string]any{"listen": heldTCP} // taken by another socket
		}},
	} {
		t.Run(tc.part, func(t *testing.T) {
			before := snapshot(t, a)
			d := withUserChange(testDoc(t))
			tc.fault(d)
			_, err := a.Apply(t.Context(), encode(t, d), "test", 0, false)
			var pe *partError
			if !errors.As(err, &pe) || pe.part != tc.part {
				t.Fatalf("push refused with %v; want a refusal by part %q", err, tc.part)
			}
			if !strings.HasPrefix(err.Error(), "applying to "+tc.part+": ") {
				t.Errorf("refusal %q does not name the part", err)
			}
			if after := snapshot(t, a); !equalJSON(before, after) {
				t.Errorf("a refused push changed the box:\nbefore %+v\nafter  %+v", before, after)
			}
			if code := register(t, box, "1003", "demo1003"); code != sip.StatusOK {
				t.Errorf("user 1003 (removed by the refused push) cannot register: %d", code)
			}
			if code := register(t, box, "1099", "pw-1099"); code == sip.StatusOK {
				t.Error("user 1099 (added by the refused push) registers")
			}
		})
	}

	before := a.running().version.Version
	if _, err := a.Apply(t.Context(), encode(t, withUserChange(testDoc(t))), "test", 0, false); err != nil {
		t.Fatalf("the user change alone is refused: %v", err)
	}
	if v := a.running().version.Version; v != before+1 {
		t.Errorf("version %d after a good push, want %d", v, before+1)
	}
	if code := register(t, box, "1099", "pw-1099"); code != sip.StatusOK {
		t.Errorf("user 1099 cannot register after the good push: %d", code)
	}
	if code := register(t, box, "1003", "demo1003"); code == sip.StatusOK {
		t.Error("user 1003 still registers after its removal")
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestApplyDoesNotWaitForProbes pushes 200 documents alternating between
// two HQ target sets while the prober runs (five silent targets per set at
// 100 ms each: a probe starts every 20 ms) and calls arrive from HQ's
// address. Each push must return within 2 s: nothing a probe or a call
// runs may wait for the apply lock (a push used to wait for the prober to
// stop while the prober waited for the push's lock).
func TestApplyDoesNotWaitForProbes(t *testing.T) {
	var sets [2][]any
	for i := range sets {
		for range 5 {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0") // silent: probes stay in flight
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })
			sets[i] = append(sets[i], pc.LocalAddr().String())
		}
	}
	doc := func(set int) []byte {
		d := testDoc(t)
		// trusted_networks: the test's INVITEs come from an ephemeral port
		// of 127.0.0.1, not from a target's address and port.
		d["hq"] = map[string]any{"targets": sets[set], "options_interval_ms": 100, "down_after": 1, "up_after": 1,
			"trusted_networks": []any{"127.0.0.1/32"}}
		d["dialplan"] = append(d["dialplan"].([]any), map[string]any{"name": "hq", "match": `^2\d{3}$`, "route": "hq"})
		return encode(t, d)
	}
	a := startApp(t, doc(0))
	box := udpListener(t, a)
	first := a.running().version.Version

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { sendInvites(ctx, t, box) })
	defer func() { stop(); wg.Wait() }()

	for i := range 200 {
		done := make(chan error, 1)
		go func() {
			_, err := a.Apply(context.Background(), doc((i+1)%2), "test", 0, false)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("push %d: %v", i, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("push %d has not returned after 2 s; goroutines:\n%s", i, goroutines())
		}
	}
	if got := a.running().version.Version - first; got != 200 {
		t.Errorf("%d versions stored by 200 pushes of alternating documents", got)
	}
}

// sendInvites starts calls from an HQ address (trusted, no challenge) to
// an unregistered extension until ctx ends: each one goes through the
// B2BUA's admission and routing while the pushes run.
func sendInvites(ctx context.Context, t *testing.T, box string) {
	conn, err := net.Dial("udp", box)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	go func() { // drain the answers
		buf := make([]byte, 4096)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()
	local := netip.MustParseAddrPort(conn.LocalAddr().String())
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		msg := fmt.Sprintf("INVITE sip:1001@%[1]s SIP/2.0\r\n"+
			"Via: SIP/2.0/UDP %[2]s;branch=z9hG4bK-t%[3]d\r\n"+
			"Max-Forwards: 70\r\nFrom: <sip:2001@hq.example.com>;tag=t%[3]d\r\nTo: <sip:1001@%[1]s>\r\n"+
			"Call-ID: apply-%[3]d@test\r\nCSeq: 1 INVITE\r\nContact: <sip:2001@%[2]s>\r\nContent-Length: 0\r\n\r\n",
			box, local, n)
		if _, err := conn.Write([]byte(msg)); err != nil {
			return
		}
	}
}

// testManagement is a valid management section (a lab CA from appliance/pki)
// without a listen address.
func testManagement(t *testing.T) map[string]any {
	t.Helper()
	_, m := testManagementCA(t)
	return m
}

// testManagementCA is testManagement and the directory of its lab CA, for
// issuing client certificates (pki.Issue).
func testManagementCA(t *testing.T) (caDir string, section map[string]any) {
	t.Helper()
	dir := t.TempDir()
	if err := pki.InitCA(dir, "test-ca", 1); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath, err := pki.Issue(dir, "", "box", pki.Server, []string{"127.0.0.1"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return dir, map[string]any{"cert_pem": read(certPath), "key_pem": read(keyPath), "client_ca_pem": read(dir + "/ca.pem")}
}

func goroutines() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return b.String()
}
