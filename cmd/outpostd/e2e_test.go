package main

// End-to-end tests: the real outpostd binary, driven over loopback by SIPp
// (the independent peer) and by raw sockets, managed through outpostctl's
// API client on the admin socket.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/internal/testenv"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds outpostd (with -race when the tests run with it) once.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "outpost-e2e-bin")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + "/"}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/outpostd", "./cmd/outpostctl")...)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// daemon is one running outpostd.
type daemon struct {
	t    *testing.T
	dir  string
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
	api  *api.Client
}

// syncBuffer is a bytes.Buffer safe for the process's writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

// ReadFrom copies through Write, under the lock: os/exec copies the
// process's output with io.Copy, which would otherwise use the embedded
// Buffer's ReadFrom and race with String.
func (b *syncBuffer) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	buf := make([]byte, 32<<10)
	for {
		m, err := r.Read(buf)
		if m > 0 {
			b.Write(buf[:m])
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

// startDaemon runs outpostd on dir (with --config cfg when non-empty) and
// waits until its admin socket answers.
func startDaemon(t *testing.T, dir, cfg string) *daemon {
	t.Helper()
	return startDaemonIn(t, "", dir, cfg)
}

// startDaemonIn is startDaemon inside the network namespace netns (the
// kernel name; "" = the test's own). The admin socket is a file, so the
// test talks to it from outside.
func startDaemonIn(t *testing.T, netns, dir, cfg string) *daemon {
	t.Helper()
	var extra []string
	if cfg != "" {
		extra = []string{"--config", cfg}
	}
	return startDaemonArgs(t, netns, dir, extra...)
}

// startDaemonArgs is startDaemonIn with outpostd's other flags.
func startDaemonArgs(t *testing.T, netns, dir string, extra ...string) *daemon {
	t.Helper()
	bin := binaries(t)
	args := append([]string{filepath.Join(bin, "outpostd"), "--data", dir, "--log-level", "info"}, extra...)
	if netns != "" {
		args = append([]string{"ip", "netns", "exec", netns}, args...)
	}
	logBuf := &syncBuffer{}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logBuf, logBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, dir: dir, cmd: cmd, log: logBuf, done: make(chan error, 1), api: api.NewUnixClient(filepath.Join(dir, "outpostd.sock"))}
	go func() { d.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("outpostd log (last 16 KiB):\n%s", tail(logBuf.String(), 16384))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-d.done:
			t.Fatalf("outpostd exited at start: %v\n%s", err, logBuf.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.api.Status(ctx)
		cancel()
		if err == nil {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("outpostd not ready after 30 s: %v\n%s", err, logBuf.String())
		}
		time.Sleep(50 * time.Millisecond) // polling the socket for readiness, bounded by the deadline
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stop sends SIGTERM and checks outpostd exits cleanly.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			d.t.Fatalf("outpostd exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		d.t.Fatal("outpostd did not stop within 20 s of SIGTERM")
	}
}

// alive fails the test if the process has exited.
func (d *daemon) alive() {
	d.t.Helper()
	select {
	case err := <-d.done:
		d.t.Fatalf("outpostd died: %v", err)
	default:
	}
}

func (d *daemon) status() api.Status {
	d.t.Helper()
	s, err := d.api.Status(d.t.Context())
	if err != nil {
		d.t.Fatal(err)
	}
	return s
}

// listener returns the bound address of the first listener of transport.
func (d *daemon) listener(transport string) string {
	d.t.Helper()
	for _, l := range d.status().Listeners {
		if strings.HasPrefix(l, transport+":") {
			return strings.TrimPrefix(l, transport+":")
		}
	}
	d.t.Fatalf("no %s listener in %v", transport, d.status().Listeners)
	return ""
}

// waitFor polls the daemon's status until cond holds (state changes inside
// the daemon that have no event the test can subscribe to), failing the
// test after within.
func (d *daemon) waitFor(what string, within time.Duration, cond func(api.Status) bool) api.Status {
	d.t.Helper()
	s, ok := d.poll(within, cond)
	if !ok {
		d.t.Fatalf("%s: not reached within %s; status %+v", what, within, s)
	}
	return s
}

// poll is waitFor that reports instead of failing: the last status, and
// whether cond held.
func (d *daemon) poll(within time.Duration, cond func(api.Status) bool) (api.Status, bool) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := d.status()
		if cond(s) {
			return s, true
		}
		if time.Now().After(deadline) {
			return s, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metrics fetches GET /metrics over the admin socket: the body and its
// Content-Type.
func (d *daemon) metrics() (string, string) {
	d.t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(d.dir, "outpostd.sock"))
	}}}
	res, err := hc.Get("http://outpostd/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return string(body), res.Header.Get("Content-Type")
}

// benchDoc is a config document with n users userNNNN / pwNNNN in realm bench.local.
func benchDoc(n int, listen []string, extra func(map[string]any)) map[string]any {
	users := make([]map[string]any, n)
	for i := range users {
		users[i] = map[string]any{"extension": fmt.Sprintf("user%04d", i), "password": fmt.Sprintf("pw%04d", i)}
	}
	doc := map[string]any{
		"schema": 1,
		"site":   map[string]any{"name": "e2e", "domain": "bench.local"},
		"sip":    map[string]any{"listen": listen, "realm": "bench.local", "min_expires": 1, "max_expires": 3600},
		"users":  users,
	}
	if extra != nil {
		extra(doc)
	}
	return doc
}

func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// usersCSV writes SIPp injection data: user, auth keyword, expires.
func usersCSV(t *testing.T, n int, password func(i int) string, expires int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("SEQUENTIAL\n")
	for i := range n {
		u := fmt.Sprintf("user%04d", i)
		fmt.Fprintf(&b, "%s;[authentication username=%s password=%s];%d\n", u, u, password(i), expires)
	}
	p := filepath.Join(t.TempDir(), "users.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func rightPassword(i int) string { return fmt.Sprintf("pw%04d", i) }

func needSIPp(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: end-to-end test with SIPp (make test runs it)")
	}
	testenv.NeedTool(t, "sipp")
}

// sipp runs one bounded SIPp scenario against target and returns its
// exit error and output. SIPp exits 0 only when every call succeeded.
func sipp(t *testing.T, scenario, target, csv string, calls, rate int, extra ...string) (string, error) {
	t.Helper()
	return sippIn(t, "", scenario, target, csv, calls, rate, extra...)
}

// sippIn is sipp inside the network namespace netns ("" = the test's own).
func sippIn(t *testing.T, netns, scenario, target, csv string, calls, rate int, extra ...string) (string, error) {
	t.Helper()
	needSIPp(t)
	work := t.TempDir()
	sf := scenario // a scenario the test wrote
	if !filepath.IsAbs(scenario) {
		var err error
		if sf, err = filepath.Abs(filepath.Join("testdata", "sipp", scenario)); err != nil {
			t.Fatal(err)
		}
	}
	port := []string{"-p", "0"}
	if slices.Contains(extra, "-p") {
		port = nil // the caller binds a known port (or address, with -i)
	}
	if !slices.Contains(extra, "-i") {
		port = append(port, "-i", "127.0.0.1")
	}
	args := append([]string{target, "-sf", sf, "-inf", csv}, port...)
	args = append(args, "-m", fmt.Sprint(calls), "-r", fmt.Sprint(rate), "-l", "2000",
		"-nostdin", "-recv_timeout", "10000", "-timeout", "120", "-timeout_error", "-trace_err",
		"-error_file", filepath.Join(work, "err.log"), "-max_recv_loops", "100000")
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	name := "sipp"
	if netns != "" {
		name, args = "ip", append([]string{"netns", "exec", netns, "sipp"}, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	errs, _ := os.ReadFile(filepath.Join(work, "err.log"))
	return string(out) + "\n--- sipp error log ---\n" + tail(string(errs), 3000), err
}
