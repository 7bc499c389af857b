package appliance

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/pki"
)

// testClient is an HTTPS client of the management API at addr with a
// client certificate named name, issued by the lab CA in caDir.
type testClient struct {
	hc     *http.Client
	base   string
	serial *big.Int
}

func newTestClient(t *testing.T, caDir, name, addr string) *testClient {
	t.Helper()
	certPath, keyPath, err := pki.Issue(caDir, t.TempDir(), name, pki.Client, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caDir + "/" + pki.CACertFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return &testClient{hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, base: "https://" + addr, serial: leaf.SerialNumber}
}

// get returns the status and the "error" of a JSON error body.
func (c *testClient) get(t *testing.T, path string) (int, string) {
	t.Helper()
	res, err := c.hc.Get(c.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var e struct{ Error string }
	if res.StatusCode != http.StatusOK {
		if err := json.Unmarshal(body, &e); err != nil && res.StatusCode == http.StatusForbidden {
			t.Errorf("GET %s: 403 body is not JSON: %q", path, body)
		}
	}
	return res.StatusCode, e.Error
}

// colonSerial writes a serial as openssl prints it: "0A:1B:...".
func colonSerial(n *big.Int) string {
	var parts []string
	for _, b := range n.Bytes() {
		parts = append(parts, fmt.Sprintf("%02X", b))
	}
	return strings.Join(parts, ":")
}

func (m *mgmt) server() *http.Server { return m.slot.server() }

// TestManagementClientAccess: two client certificates from the same CA,
// "hq" and "intruder". Without allowed_clients both may act (as before
// the list existed); with allowed_clients ["hq"] the intruder gets 403;
// with hq's serial revoked (written with colons, upper case) hq gets 403
// too, on the connection it already has open. Neither change rebinds the
// listener. Profiling is not served over HTTPS.
func TestManagementClientAccess(t *testing.T) {
	caDir, sec := testManagementCA(t)
	sec["listen"] = "127.0.0.1:0"
	doc := testDoc(t)
	doc["management"] = sec
	a := startApp(t, encode(t, doc))
	addr, srv := a.mgmt.Addr(), a.mgmt.server()
	if addr == "" {
		t.Fatal("no management listener")
	}
	hq := newTestClient(t, caDir, "hq", addr)
	intruder := newTestClient(t, caDir, "intruder", addr)

	if code, _ := hq.get(t, "/api/v1/status"); code != http.StatusOK {
		t.Fatalf("hq without allowed_clients: %d", code)
	}
	if code, _ := intruder.get(t, "/api/v1/status"); code != http.StatusOK {
		t.Fatalf("intruder without allowed_clients (any certificate of the CA): %d", code)
	}

	push := func(step string) {
		t.Helper()
		if _, err := a.Apply(t.Context(), encode(t, doc), "test", 0, false); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if a.mgmt.Addr() != addr || a.mgmt.server() != srv {
			t.Errorf("%s rebound the management listener", step)
		}
	}
	sec["allowed_clients"] = []any{"hq"}
	push("allowed_clients [hq]")
	if code, _ := hq.get(t, "/api/v1/status"); code != http.StatusOK {
		t.Errorf("hq, allowed: GET /api/v1/status = %d", code)
	}
	if code, msg := intruder.get(t, "/api/v1/status"); code != http.StatusForbidden || msg != "client certificate not allowed" {
		t.Errorf("intruder, not allowed: GET /api/v1/status = %d %q, want 403 %q", code, msg, "client certificate not allowed")
	}
	if code, _ := intruder.get(t, "/api/v1/config"); code != http.StatusForbidden {
		t.Errorf("intruder, not allowed: GET /api/v1/config = %d", code)
	}
	if code, _ := hq.get(t, "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("hq: GET /debug/pprof/ over HTTPS = %d, want 404", code)
	}

	sec["revoked_serials"] = []any{colonSerial(hq.serial)}
	push("revoked_serials [hq's]")
	if code, msg := hq.get(t, "/api/v1/status"); code != http.StatusForbidden || msg != "client certificate revoked" {
		t.Errorf("hq, revoked: GET /api/v1/status = %d %q, want 403 %q", code, msg, "client certificate revoked")
	}
	if code, _ := intruder.get(t, "/api/v1/status"); code != http.StatusForbidden {
		t.Errorf("intruder after the revocation: %d", code)
	}
}

// TestClientAccessRefusal: what allowed_clients matches (CN, DNS names in
// any case, email addresses, URIs) and that a revoked serial is refused
// even when the name is allowed.
func TestClientAccessRefusal(t *testing.T) {
	spiffe, _ := url.Parse("spiffe://example.com/hq")
	cert := func(serial int64, cn string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			DNSNames: []string{"Tools.HQ.example.com"}, EmailAddresses: []string{"noc@example.com"}, URIs: []*url.URL{spiffe}}
	}
	for _, tc := range []struct {
		allowed, revoked []string
		cert             *x509.Certificate
		want             string
	}{
		{nil, nil, cert(1, "anyone"), ""},
		{[]string{"hq"}, nil, cert(1, "hq"), ""},
		{[]string{"hq"}, nil, cert(1, "HQ"), refusedNotAllowed},
		{[]string{"tools.hq.example.com"}, nil, cert(1, "x"), ""},
		{[]string{"noc@example.com"}, nil, cert(1, "x"), ""},
		{[]string{"spiffe://example.com/hq"}, nil, cert(1, "x"), ""},
		{[]string{"hq", "other"}, nil, cert(1, "intruder"), refusedNotAllowed},
		{[]string{"hq"}, []string{"00:0A:FF"}, cert(0xaff, "hq"), refusedRevoked},
		{nil, []string{"aff"}, cert(0xaff, "anyone"), refusedRevoked},
		{nil, []string{"aff"}, cert(0xafe, "anyone"), ""},
	} {
		a := newClientAccess(config.Management{AllowedClients: tc.allowed, RevokedSerials: tc.revoked})
		if got := a.refusal(tc.cert); got != tc.want {
			t.Errorf("allowed %q revoked %q, CN %q serial %x: %q, want %q",
				tc.allowed, tc.revoked, tc.cert.Subject.CommonName, tc.cert.SerialNumber, got, tc.want)
		}
	}
}

// TestRefusalLogRateLimited: a refused client is logged at most once a
// minute; another client is logged on its own.
func TestRefusalLogRateLimited(t *testing.T) {
	var buf bytes.Buffer
	m := newMgmt(http.NotFoundHandler(), slog.New(slog.NewTextHandler(&buf, nil)))
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	m.refusals.now = func() time.Time { return now }
	m.access.Store(newClientAccess(config.Management{AllowedClients: []string{"hq"}}))
	h := m.guard(http.NotFoundHandler())
	request := func(cn string, serial int64) {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/status", nil)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}}}}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden || strings.TrimSpace(w.Body.String()) != `{"error":"client certificate not allowed"}` {
			t.Fatalf("%s: %d %s", cn, w.Code, w.Body)
		}
	}
	lines := func() int { return strings.Count(buf.String(), "\n") }
	for range 5 {
		request("intruder", 7)
	}
	if n := lines(); n != 1 {
		t.Fatalf("%d log lines for 5 refusals within a second, want 1:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "cn=intruder") || !strings.Contains(buf.String(), "reason=\"client certificate not allowed\"") {
		t.Errorf("log line lacks the client or the reason: %s", buf.String())
	}
	request("other", 8)
	if n := lines(); n != 2 {
		t.Errorf("another client: %d log lines, want 2", n)
	}
	now = now.Add(59 * time.Second)
	request("intruder", 7)
	if n := lines(); n != 2 {
		t.Errorf("59 s later: %d log lines, want 2", n)
	}
	now = now.Add(2 * time.Second)
	request("intruder", 7)
	if n := lines(); n != 3 {
		t.Errorf("61 s later: %d log lines, want 3", n)
	}
}

// startMgmt serves h on a management part of its own (the test lab CA,
// a loopback port) within limits, and returns it with a client "hq".
func startMgmt(t *testing.T, h http.Handler, limits serverLimits) (*mgmt, *testClient, *tls.Config) {
	t.Helper()
	caDir, sec := testManagementCA(t)
	sec["listen"] = "127.0.0.1:0"
	var ms config.Management
	raw, _ := json.Marshal(sec)
	if err := json.Unmarshal(raw, &ms); err != nil {
		t.Fatal(err)
	}
	m := newMgmt(h, slog.New(slog.DiscardHandler))
	m.limits = limits
	c, err := m.prepare(t.Context(), &partConfigs{Management: mgmtConfig{ms}})
	if err != nil {
		t.Fatal(err)
	}
	c.Commit()
	t.Cleanup(m.Stop)
	hq := newTestClient(t, caDir, "hq", m.Addr())
	tc := hq.hc.Transport.(*http.Transport).TLSClientConfig.Clone()
	return m, hq, tc
}

// TestManagementServerLimits: the HTTPS server has every timeout and a
// header limit; a client that stalls in its headers or idles between
// requests is disconnected; a 100 KiB header gets 431.
func TestManagementServerLimits(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

	t.Run("configured", func(t *testing.T) {
		m, _, _ := startMgmt(t, ok, mgmtLimits)
		s := m.server()
		if s.ReadHeaderTimeout != 10*time.Second || s.ReadTimeout != mgmtReadTimeout || s.WriteTimeout != mgmtWriteTimeout ||
			s.IdleTimeout != mgmtIdleTimeout || s.MaxHeaderBytes != 64<<10 {
			t.Errorf("server limits: read header %v, read %v, write %v, idle %v, max header bytes %d",
				s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
		}
		if s.ReadTimeout < time.Minute || s.WriteTimeout < s.ReadTimeout || s.IdleTimeout <= 0 || mgmtUploadTimeout < 20*time.Minute {
			t.Errorf("timeouts too short for the API's requests")
		}
	})

	t.Run("header 100 KiB", func(t *testing.T) {
		_, hq, _ := startMgmt(t, ok, mgmtLimits)
		req, _ := http.NewRequest(http.MethodGet, hq.base+"/api/v1/status", nil)
		req.Header.Set("X-Padding", strings.Repeat("a", 100<<10))
		res, err := hq.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("100 KiB header: %d, want 431", res.StatusCode)
		}
	})

	limits := mgmtLimits
	limits.readHeader, limits.idle = 300*time.Millisecond, 300*time.Millisecond
	// closedWithin dials, runs send and waits for the server to close.
	closedWithin := func(t *testing.T, send func(c *tls.Conn, br *bufio.Reader)) {
		_, hq, tc := startMgmt(t, ok, limits)
		c, err := tls.Dial("tcp", strings.TrimPrefix(hq.base, "https://"), tc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		send(c, br)
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = br.ReadByte()
		var ne net.Error
		switch {
		case err == nil:
			t.Fatal("the server sent data")
		case errors.As(err, &ne) && ne.Timeout():
			t.Fatal("the server kept the connection open for 5 s")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("closed after %v", d)
		}
	}
	t.Run("stalled header", func(t *testing.T) {
		closedWithin(t, func(c *tls.Conn, _ *bufio.Reader) {
			if _, err := io.WriteString(c, "GET /api/v1/status HTTP/1.1\r\nHost: box\r\nX-Slow: "); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("idle", func(t *testing.T) {
		closedWithin(t, func(c *tls.Conn, br *bufio.Reader) {
			if _, err := io.WriteString(c, "GET /api/v1/status HTTP/1.1\r\nHost: box\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || res.Close {
				t.Fatalf("first request: %d, close %v", res.StatusCode, res.Close)
			}
		})
	})
}

// TestManagementUploadDeadline: with read and write timeouts of 300 ms, a
// firmware upload from an allowed client that takes a second still
// completes (it has mgmtUploadTimeout), while any other request that slow
// fails.
func TestManagementUploadDeadline(t *testing.T) {
	limits := mgmtLimits
	limits.read, limits.write, limits.upload = 300*time.Millisecond, 300*time.Millisecond, 10*time.Second
	count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, n)
	})
	_, hq, _ := startMgmt(t, count, limits)
	slowPut := func(path string) (int, string, error) {
		pr, pw := io.Pipe()
		go func() {
			for range 4 {
				time.Sleep(250 * time.Millisecond)
				if _, err := pw.Write(make([]byte, 1000)); err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPut, hq.base+path, pr)
		res, err := hq.hc.Do(req)
		if err != nil {
			pr.CloseWithError(err)
			return 0, "", err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body), nil
	}
	if code, body, err := slowPut("/api/v1/firmware"); err != nil || code != http.StatusOK || body != "4000" {
		t.Errorf("slow firmware upload: %d %q %v, want 200 \"4000\"", code, body, err)
	}
	if code, body, err := slowPut("/api/v1/config"); err == nil && code == http.StatusOK {
		t.Errorf("slow document push beyond the read timeout: %d %q", code, body)
	}
}
