package ctl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/pki"
)

// fleetPKI is a throwaway lab CA (package pki, as outpostctl pki makes
// it) with a box certificate for 127.0.0.1 and an HQ client certificate.
type fleetPKI struct {
	caPool     *x509.CertPool
	caFile     string
	serverCert tls.Certificate
	clientCert string // files
	clientKey  string
}

// newLabCA creates a CA in a temp dir and returns the dir and its pool.
func newLabCA(t *testing.T, name string) (string, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	if err := pki.InitCA(dir, name, 1); err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("CA PEM has no certificate")
	}
	return dir, pool
}

// clientCertFiles issues an HQ client certificate from the CA in caDir.
func clientCertFiles(t *testing.T, caDir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, err := pki.Issue(caDir, t.TempDir(), "hq", pki.Client, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func newFleetPKI(t *testing.T) *fleetPKI {
	t.Helper()
	dir, pool := newLabCA(t, "outpost test CA")
	p := &fleetPKI{caPool: pool, caFile: filepath.Join(dir, pki.CACertFile)}
	certFile, keyFile, err := pki.Issue(dir, dir, "box", pki.Server, []string{"127.0.0.1"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.serverCert, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	p.clientCert, p.clientKey = clientCertFiles(t, dir)
	return p
}

// fleetLoad counts the Apply calls in flight across boxes. With want > 0
// every Apply waits (until its request ends) for want calls to have been
// in flight at once, so a test sees the overlap the concurrency limit
// allows as an event instead of hoping a sleep produces it.
type fleetLoad struct {
	want          int64
	inflight, max atomic.Int64
	reached       chan struct{} // closed when max reaches want
	once          sync.Once
}

func newFleetLoad(want int64) *fleetLoad {
	return &fleetLoad{want: want, reached: make(chan struct{})}
}

func (l *fleetLoad) enter(ctx context.Context) {
	n := l.inflight.Add(1)
	for {
		m := l.max.Load()
		if n <= m || l.max.CompareAndSwap(m, n) {
			break
		}
	}
	if l.want <= 0 {
		return
	}
	if n >= l.want {
		l.once.Do(func() { close(l.reached) })
	}
	select {
	case <-l.reached:
	case <-ctx.Done(): // never reached: the test sees max < want
	}
}

func (l *fleetLoad) leave() { l.inflight.Add(-1) }

// fakeBox is a Backend whose Apply answers from applyFn and records what
// it was given. A hanging box never answers while the test runs: its
// Apply blocks until the test ends (hangingBox), so the client can only
// give up, and no late answer can race the client's cancellation.
type fakeBox struct {
	applyFn func() (api.ApplyResult, error)
	load    *fleetLoad
	hang    chan struct{} // non-nil: Apply blocks until it is closed
	arrived chan struct{} // non-nil: closed when the first Apply starts

	mu      sync.Mutex
	calls   int
	doc     []byte
	source  string
	ifMatch int64
	dryRun  bool
	arrive  sync.Once
}

func (f *fakeBox) Apply(ctx context.Context, doc []byte, source string, ifMatch int64, dryRun bool) (api.ApplyResult, error) {
	f.load.enter(ctx)
	defer f.load.leave()
	f.mu.Lock()
	f.calls++
	f.doc, f.source, f.ifMatch, f.dryRun = append([]byte(nil), doc...), source, ifMatch, dryRun
	f.mu.Unlock()
	if f.arrived != nil {
		f.arrive.Do(func() { close(f.arrived) })
	}
	if f.hang != nil {
		<-f.hang
		return api.ApplyResult{}, errors.New("hanging box released at the end of the test")
	}
	return f.applyFn()
}

func (f *fakeBox) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeBox) Status(context.Context) api.Status                { return api.Status{} }
func (f *fakeBox) Registrations(context.Context) []api.Registration { return nil }
func (f *fakeBox) Config(context.Context, int64) (api.ConfigResponse, error) {
	return api.ConfigResponse{}, api.ErrNotFound
}
func (f *fakeBox) History(context.Context) ([]api.Version, error) { return nil, nil }
func (f *fakeBox) Rollback(context.Context, int64) (api.ApplyResult, error) {
	return api.ApplyResult{}, api.ErrNotFound
}
func (f *fakeBox) Route(context.Context, string) api.RouteResult           { return api.RouteResult{} }
func (f *fakeBox) Calls(context.Context) []api.Call                        { return nil }
func (f *fakeBox) CDRs(context.Context, time.Time, int) ([]api.CDR, error) { return nil, nil }
func (f *fakeBox) Interfaces(context.Context) api.Interfaces               { return api.Interfaces{} }
func (f *fakeBox) MediaResources(context.Context) api.MediaResources       { return api.MediaResources{} }

// boxHandler is the real API handler over f, without metrics.
func boxHandler(f *fakeBox) http.Handler {
	return api.Handler(f, slog.New(slog.DiscardHandler), nil)
}

// startBox serves api.Handler(f) over HTTPS requiring a client
// certificate signed by p's CA.
func startBox(t *testing.T, p *fleetPKI, f *fakeBox) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(boxHandler(f))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{p.serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.caPool,
		MinVersion:   tls.VersionTLS12,
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func hostOf(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "https://") }

// hangingBox starts a box whose Apply never answers before the test ends
// and whose first Apply closes its arrived channel.
func hangingBox(t *testing.T, p *fleetPKI, load *fleetLoad) (*fakeBox, string) {
	t.Helper()
	f := &fakeBox{load: load, hang: make(chan struct{}), arrived: make(chan struct{})}
	host := hostOf(startBox(t, p, f))
	// Cleanups run last-in first-out: release the handler before
	// startBox's srv.Close waits for it.
	t.Cleanup(func() { close(f.hang) })
	return f, host
}

func versionFn(v int64, unchanged bool) func() (api.ApplyResult, error) {
	return func() (api.ApplyResult, error) {
		return api.ApplyResult{Version: api.Version{Version: v}, Unchanged: unchanged, Valid: true}, nil
	}
}

// runFleet runs fleetPush and returns stdout, the progress output and the error.
func runFleet(t *testing.T, asJSON bool, args ...string) (string, string, error) {
	t.Helper()
	var out, prog bytes.Buffer
	c := &cmd{out: &out, json: asJSON}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.fleetVerb(ctx, args, &prog)
	return out.String(), prog.String(), err
}

func writeDoc(t *testing.T) (string, []byte) {
	t.Helper()
	doc := []byte(`{"site":"branch-7","users":[{"ext":"100"}]}` + "\n")
	file := filepath.Join(t.TempDir(), "site.json")
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, doc
}

// tableRows maps HOST to RESULT and returns the hosts in printed order.
func tableRows(t *testing.T, out string) ([]string, map[string]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "HOST") {
		t.Fatalf("no table header:\n%s", out)
	}
	var order []string
	res := make(map[string]string)
	for _, l := range lines[1:] {
		host, result, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("bad row %q", l)
		}
		order = append(order, host)
		res[host] = strings.TrimSpace(result)
	}
	return order, res
}

func TestFleetPushMixed(t *testing.T) {
	p := newFleetPKI(t)
	// The first two boxes are in flight together before either answers.
	load := newFleetLoad(2)
	box := func(fn func() (api.ApplyResult, error)) *fakeBox {
		return &fakeBox{applyFn: fn, load: load}
	}
	invalid := func() (api.ApplyResult, error) {
		return api.ApplyResult{}, &api.ValidationError{Errors: []api.FieldError{
			{Path: "users[0].ext", Message: "duplicate extension"},
			{Path: "trunks", Message: "at least one trunk"},
		}}
	}
	fakes := []*fakeBox{
		box(versionFn(7, false)),
		box(versionFn(3, true)),
		box(invalid),
		box(versionFn(1, false)), // closed before the push
		box(versionFn(12, false)),
	}
	var hosts []string
	for i, f := range fakes {
		s := startBox(t, p, f)
		hosts = append(hosts, hostOf(s))
		if i == 3 {
			s.Close()
		}
	}
	file, doc := writeDoc(t)
	// The first host is given again, with the scheme: it is pushed once.
	hostArg := strings.Join(hosts, ",") + ",https://" + hosts[0]
	out, prog, err := runFleet(t, false, "push", file, "--hosts", hostArg, "--parallel", "2",
		"--cert", p.clientCert, "--key", p.clientKey, "--ca", p.caFile)
	if err == nil || !strings.Contains(err.Error(), "2 of 5 boxes failed") {
		t.Errorf("err = %v, want 2 of 5 boxes failed", err)
	}
	t.Logf("stdout:\n%s", out)
	order, res := tableRows(t, out)
	if strings.Join(order, ",") != strings.Join(hosts, ",") {
		t.Errorf("table hosts %q, want %q", order, hosts)
	}
	want := []string{"version 7", "unchanged (version 3)", "users[0].ext: duplicate extension; trunks: at least one trunk", "connection refused", "version 12"}
	for i, h := range hosts {
		if res[h] != want[i] {
			t.Errorf("%s (box %d): %q, want %q", h, i, res[h], want[i])
		}
	}
	for i, f := range fakes {
		f.mu.Lock()
		switch {
		case i == 3:
			if f.calls != 0 {
				t.Errorf("closed box got %d calls", f.calls)
			}
		case f.calls != 1:
			t.Errorf("box %d: %d calls, want 1", i, f.calls)
		case !bytes.Equal(f.doc, doc):
			t.Errorf("box %d got document %q, want %q", i, f.doc, doc)
		case f.source != "fleet:"+file:
			t.Errorf("box %d got source %q", i, f.source)
		case f.dryRun || f.ifMatch != 0:
			t.Errorf("box %d: dryRun %v ifMatch %d", i, f.dryRun, f.ifMatch)
		}
		f.mu.Unlock()
	}
	if m := load.max.Load(); m != 2 {
		t.Errorf("max in flight %d, want 2", m)
	}
	if !strings.Contains(prog, "5/5 ok 3 failed 2") || !strings.Contains(prog, "[##########]") {
		t.Errorf("progress %q", prog)
	}

	// The same run with --json.
	out, _, err = runFleet(t, true, "push", "--hosts", hostArg, "--parallel=2", "--cert", p.clientCert,
		"--key", p.clientKey, "--ca", p.caFile, file)
	if err == nil {
		t.Error("json run: no error")
	}
	var rs []fleetResult
	if jerr := json.Unmarshal([]byte(out), &rs); jerr != nil {
		t.Fatalf("json: %v\n%s", jerr, out)
	}
	if len(rs) != 5 {
		t.Fatalf("json: %d results", len(rs))
	}
	if !rs[0].OK || rs[0].Version != 7 || rs[0].Host != hosts[0] {
		t.Errorf("json[0] = %+v", rs[0])
	}
	if !rs[1].OK || !rs[1].Unchanged || rs[1].Version != 3 {
		t.Errorf("json[1] = %+v", rs[1])
	}
	if rs[2].OK || len(rs[2].Errors) != 2 || rs[2].Errors[1].Path != "trunks" {
		t.Errorf("json[2] = %+v", rs[2])
	}
	if rs[3].OK || rs[3].Error != "connection refused" {
		t.Errorf("json[3] = %+v", rs[3])
	}
	if m := load.max.Load(); m > 2 {
		t.Errorf("max in flight %d, want <= 2", m)
	}
}

func TestFleetPushAllOKDryRunHostFile(t *testing.T) {
	p := newFleetPKI(t)
	load := &fleetLoad{}
	var fakes []*fakeBox
	var hosts []string
	for i := range 4 {
		f := &fakeBox{applyFn: func() (api.ApplyResult, error) {
			return api.ApplyResult{Version: api.Version{Version: int64(10 + i)}, DryRun: true, Valid: true}, nil
		}, load: load}
		fakes = append(fakes, f)
		hosts = append(hosts, hostOf(startBox(t, p, f)))
	}
	list := "# branch boxes\n\n" + hosts[0] + "\n  https://" + hosts[1] + "/  # with scheme\n#" + "127.0.0.1:1\n" +
		hosts[2] + "\n" + hosts[0] + "\n" + hosts[3] + "\n"
	listFile := filepath.Join(t.TempDir(), "hosts.txt")
	if err := os.WriteFile(listFile, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	file, doc := writeDoc(t)
	out, prog, err := runFleet(t, false, "push", file, "--hosts", "@"+listFile, "--dry-run",
		"--cert", p.clientCert, "--key", p.clientKey, "--ca", p.caFile, "--timeout", "10s")
	if err != nil {
		t.Fatalf("err = %v\n%s", err, out)
	}
	order, res := tableRows(t, out)
	if strings.Join(order, ",") != strings.Join(hosts, ",") {
		t.Errorf("table hosts %q, want %q", order, hosts)
	}
	for _, h := range hosts {
		if res[h] != "valid (dry run)" {
			t.Errorf("%s: %q", h, res[h])
		}
	}
	for i, f := range fakes {
		if f.calls != 1 || !f.dryRun || !bytes.Equal(f.doc, doc) {
			t.Errorf("box %d: calls %d dryRun %v doc %q", i, f.calls, f.dryRun, f.doc)
		}
	}
	if !strings.Contains(prog, "4/4 ok 4 failed 0") {
		t.Errorf("progress %q", prog)
	}

	// Not a dry run: plain versions, nil error.
	for _, f := range fakes {
		f.applyFn = versionFn(5, false)
	}
	out, _, err = runFleet(t, false, "push", file, "--hosts", strings.Join(hosts, ","),
		"--cert", p.clientCert, "--key", p.clientKey, "--ca", p.caFile)
	if err != nil {
		t.Fatalf("err = %v\n%s", err, out)
	}
	_, res = tableRows(t, out)
	for _, h := range hosts {
		if res[h] != "version 5" {
			t.Errorf("%s: %q", h, res[h])
		}
	}
	for i, f := range fakes {
		if f.dryRun {
			t.Errorf("box %d: dry run", i)
		}
	}
}

func TestFleetPushWrongClientCA(t *testing.T) {
	p := newFleetPKI(t)
	load := &fleetLoad{}
	good := &fakeBox{applyFn: versionFn(2, false), load: load}
	strict := &fakeBox{applyFn: versionFn(2, false), load: load}
	goodHost := hostOf(startBox(t, p, good))

	// A box that trusts only another CA for client certificates.
	otherDir, otherPool := newLabCA(t, "other CA")
	srv := httptest.NewUnstartedServer(boxHandler(strict))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: otherPool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	strictHost := hostOf(srv)

	file, _ := writeDoc(t)
	out, _, err := runFleet(t, false, "push", file, "--hosts", strictHost+","+goodHost,
		"--cert", p.clientCert, "--key", p.clientKey, "--ca", p.caFile)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 boxes failed") {
		t.Errorf("err = %v", err)
	}
	t.Logf("stdout:\n%s", out)
	_, res := tableRows(t, out)
	if res[goodHost] != "version 2" {
		t.Errorf("good box: %q", res[goodHost])
	}
	if r := res[strictHost]; !strings.Contains(r, "TLS") && !strings.Contains(r, "handshake") {
		t.Errorf("strict box: %q, want a TLS handshake error", r)
	}
	if strict.calls != 0 {
		t.Errorf("strict box applied %d times", strict.calls)
	}

	// And an HQ client cert from another CA against a normal box.
	cert, key := clientCertFiles(t, otherDir)
	out, _, err = runFleet(t, false, "push", file, "--hosts", goodHost, "--cert", cert, "--key", key, "--ca", p.caFile)
	if err == nil {
		t.Error("foreign client cert: no error")
	}
	_, res = tableRows(t, out)
	if r := res[goodHost]; !strings.Contains(r, "TLS") {
		t.Errorf("foreign client cert: %q, want a TLS error", r)
	}

	// A box whose certificate our CA did not sign.
	out, _, _ = runFleet(t, false, "push", file, "--hosts", goodHost, "--cert", cert, "--key", key, "--ca", filepath.Join(otherDir, pki.CACertFile))
	_, res = tableRows(t, out)
	if r := res[goodHost]; !strings.Contains(r, "not signed by our CA") {
		t.Errorf("unknown server CA: %q", r)
	}
}

func TestFleetPushUsage(t *testing.T) {
	for _, k := range []string{"OUTPOST_CERT", "OUTPOST_KEY", "OUTPOST_CA"} {
		t.Setenv(k, "")
	}
	p := newFleetPKI(t)
	file, _ := writeDoc(t)
	creds := []string{"--cert", p.clientCert, "--key", p.clientKey, "--ca", p.caFile}
	for _, args := range [][]string{
		{"push", "--hosts", "127.0.0.1:1"},                               // no file
		append([]string{"push", file}, creds...),                         // no hosts
		append([]string{"push", file, "--hosts", "127.0.0.1"}, creds...), // no port
		append([]string{"push", file, "--hosts", "http://127.0.0.1:1"}, creds...),
		append([]string{"push", file, "--hosts", " , "}, creds...),
		append([]string{"push", file, "--hosts", "127.0.0.1:1", "--parallel", "0"}, creds...),
	} {
		_, _, err := runFleet(t, false, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: err = %v, want a usage error", args, err)
		}
	}
	c := &cmd{out: &bytes.Buffer{}, errOut: &bytes.Buffer{}}
	if err := c.fleet(context.Background(), []string{"pull"}); err == nil {
		t.Error("fleet pull: no error")
	}
	// A missing key file fails before anything is pushed.
	_, _, err := runFleet(t, false, "push", file, "--hosts", "127.0.0.1:1", "--cert", p.clientCert, "--key", "/nonexistent", "--ca", p.caFile)
	if err == nil || !strings.Contains(err.Error(), "client certificate") {
		t.Errorf("missing key: %v", err)
	}
}

func TestParseHostsDedup(t *testing.T) {
	got, err := parseHosts("b:2, https://a:1 ,a:1,b:2,[::1]:3")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "b:2,a:1,[::1]:3" {
		t.Errorf("got %q", got)
	}
}

// The slow box never answers: its push ends on the per-box --timeout,
// and the next box is still pushed. The fast box's TLS handshake and
// answer must fit in the same --timeout, so it is generous for a loaded
// machine running -race.
func TestFleetPushPerBoxTimeout(t *testing.T) {
	p := newFleetPKI(t)
	load := &fleetLoad{}
	slow, slowHost := hangingBox(t, p, load)
	fast := &fakeBox{applyFn: versionFn(4, false), load: load}
	fastHost := hostOf(startBox(t, p, fast))
	file, _ := writeDoc(t)
	out, _, err := runFleet(t, false, "push", file, "--hosts", slowHost+","+fastHost, "--parallel", "1",
		"--timeout", "2s", "--cert", p.clientCert, "--key", p.clientKey, "--ca", p.caFile)
	if err == nil || !strings.Contains(err.Error(), "1 of 2") {
		t.Errorf("err = %v, want 1 of 2 boxes failed", err)
	}
	_, res := tableRows(t, out)
	if res[slowHost] != "timed out after 2s" || res[fastHost] != "version 4" {
		t.Errorf("results %q", res)
	}
	if n := slow.callCount(); n != 1 {
		t.Errorf("slow box: %d calls, want 1", n)
	}
}

// expiringCtx is a context whose deadline is reached when the test says
// so, on an event instead of a clock: Err is DeadlineExceeded once expire
// is called.
type expiringCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}
	once            sync.Once
}

func newExpiringCtx() *expiringCtx {
	return &expiringCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *expiringCtx) expire() { c.once.Do(func() { close(c.done) }) }

// The overall deadline passes while the first --parallel boxes' pushes
// are in flight (their requests have reached the boxes, which never
// answer): those pushes are aborted and the other boxes are not pushed.
// The concurrency limit holds: the box after them was never reached.
func TestFleetPushOverallDeadline(t *testing.T) {
	p := newFleetPKI(t)
	file, _ := writeDoc(t)
	for _, parallel := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallel=%d", parallel), func(t *testing.T) {
			load := &fleetLoad{}
			var (
				fakes []*fakeBox
				hosts []string
			)
			for range 3 {
				f, h := hangingBox(t, p, load)
				fakes, hosts = append(fakes, f), append(hosts, h)
			}
			var out, prog bytes.Buffer
			c := &cmd{out: &out}
			ctx := newExpiringCtx()
			pushed := make(chan struct{})
			go func() {
				for _, f := range fakes[:parallel] {
					select {
					case <-f.arrived:
					case <-pushed: // a box was never reached: the checks below fail
						return
					}
				}
				ctx.expire()
			}()
			err := c.fleetVerb(ctx, []string{"push", file, "--hosts", strings.Join(hosts, ","),
				"--parallel", strconv.Itoa(parallel),
				"--cert", p.clientCert, "--key", p.clientKey, "--ca", p.caFile}, &prog)
			close(pushed)
			if err == nil || !strings.Contains(err.Error(), "3 of 3") {
				t.Errorf("err = %v", err)
			}
			_, res := tableRows(t, out.String())
			for i, h := range hosts {
				want, calls := "not pushed: overall deadline reached", 0
				if i < parallel {
					want, calls = "aborted: overall deadline reached", 1
				}
				if res[h] != want {
					t.Errorf("box %d: %q, want %q", i, res[h], want)
				}
				if n := fakes[i].callCount(); n != calls {
					t.Errorf("box %d: %d calls, want %d", i, n, calls)
				}
			}
		})
	}
}

func TestFleetProgressOnlyOnTerminal(t *testing.T) {
	if progressWriter(&bytes.Buffer{}) != nil {
		t.Error("progress to a buffer")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if progressWriter(f) != nil {
		t.Error("progress to a regular file")
	}
}
