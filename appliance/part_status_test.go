package appliance

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/directory"
)

// statusGet requests path from the status page as user (no credentials
// when user is "") and returns the status code, the WWW-Authenticate
// header and the body.
func statusGet(t *testing.T, method, addr, path, user, password string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("WWW-Authenticate"), string(body)
}

// TestStatusPageAuth: the page and its API answer only an admin user's
// extension and SIP password (HTTP Basic, checked against the stored
// HA1s); the API there is read-only; a push changes the admins without
// rebinding.
func TestStatusPageAuth(t *testing.T) {
	a := startApp(t, encode(t, testDoc(t))) // 1001 is admin in the default
	addr := a.status.Addr()
	if addr == "" || strings.HasSuffix(addr, ":0") {
		t.Fatalf("status page address %q", addr)
	}
	for _, tc := range []struct {
		name, user, password string
		want                 int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"wrong password", "1001", "demo1002", http.StatusUnauthorized},
		{"unknown user", "9999", "demo1001", http.StatusUnauthorized},
		{"user who is not admin", "1002", "demo1002", http.StatusUnauthorized},
		{"admin", "1001", "demo1001", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/", "/assets/app.js", "/api/v1/status"} {
				code, auth, _ := statusGet(t, http.MethodGet, addr, path, tc.user, tc.password)
				if code != tc.want {
					t.Errorf("GET %s: %d, want %d", path, code, tc.want)
				}
				if code == http.StatusUnauthorized && !strings.HasPrefix(auth, "Basic ") {
					t.Errorf("GET %s: 401 with WWW-Authenticate %q, want a Basic challenge", path, auth)
				}
			}
		})
	}

	code, _, body := statusGet(t, http.MethodGet, addr, "/", "1001", "demo1001")
	if code != http.StatusOK || !strings.Contains(body, "<title>Outpost status</title>") {
		t.Fatalf("GET / as admin: %d\n%s", code, body)
	}
	code, _, body = statusGet(t, http.MethodGet, addr, "/api/v1/status", "1001", "demo1001")
	var st api.Status
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil || st.Mode != "standalone" || st.StatusPage != addr {
		t.Fatalf("GET /api/v1/status as admin: %d %v %+v", code, err, st)
	}
	for _, path := range []string{"/api/v1/registrations", "/api/v1/calls", "/api/v1/interfaces", "/api/v1/cdr", "/api/v1/services"} {
		if code, _, body := statusGet(t, http.MethodGet, addr, path, "1001", "demo1001"); code != http.StatusOK || !json.Valid([]byte(body)) {
			t.Errorf("GET %s as admin: %d %q", path, code, body)
		}
	}

	// Nothing that changes the box, no document, no profile, no metrics.
	for _, r := range []struct{ method, path string }{
		{http.MethodPut, "/api/v1/config"},
		{http.MethodGet, "/api/v1/config"},
		{http.MethodGet, "/api/v1/config/history"},
		{http.MethodPost, "/api/v1/config/rollback/1"},
		{http.MethodPost, "/api/v1/drain"},
		{http.MethodPut, "/api/v1/firmware"},
		{http.MethodGet, "/api/v1/route/1002"},
		{http.MethodGet, "/api/v1/media-resources"},
		{http.MethodPost, "/api/v1/status"},
		{http.MethodGet, "/debug/pprof/"},
		{http.MethodGet, "/metrics"},
	} {
		code, _, _ := statusGet(t, r.method, addr, r.path, "1001", "demo1001")
		if code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s as admin: %d, want 404 or 405", r.method, r.path, code)
		}
	}

	// A push that makes 1002 an admin and 1001 not: effective at once, on
	// the same listener.
	d := testDoc(t)
	users := d["users"].([]any)
	users[0].(map[string]any)["admin"] = false
	users[1].(map[string]any)["admin"] = true
	if _, err := a.Apply(t.Context(), encode(t, d), "test", 0, false); err != nil {
		t.Fatal(err)
	}
	if got := a.status.Addr(); got != addr {
		t.Errorf("a push that kept status.listen rebound the page: %s -> %s", addr, got)
	}
	if code, _, _ := statusGet(t, http.MethodGet, addr, "/", "1002", "demo1002"); code != http.StatusOK {
		t.Errorf("new admin 1002: %d", code)
	}
	if code, _, _ := statusGet(t, http.MethodGet, addr, "/", "1001", "demo1001"); code != http.StatusUnauthorized {
		t.Errorf("former admin 1001: %d", code)
	}

	// Switched off by a push: the listener closes.
	delete(d, "status")
	if _, err := a.Apply(t.Context(), encode(t, d), "test", 0, false); err != nil {
		t.Fatal(err)
	}
	if got := a.status.Addr(); got != "" {
		t.Errorf("status page still on %s after status was removed", got)
	}
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Error("the old status listener still answers")
	}
}

// TestStatusPageBindFailureAtStart: a status page that cannot bind at
// start does not keep the box from SIP; status says why; a push that keeps
// the address is not refused for it, and once the port is free such a push
// serves the page.
func TestStatusPageBindFailureAtStart(t *testing.T) {
	held := bindTCP(t)
	d := testDoc(t)
	d["status"] = map[string]any{"listen": held}
	a := startApp(t, encode(t, d))
	if a.status.Addr() != "" || !strings.Contains(a.status.Failure(), held) {
		t.Fatalf("status page %q, failure %q; want none and the reason", a.status.Addr(), a.status.Failure())
	}
	if s := a.Status(t.Context()); s.StatusPageError == "" {
		t.Error("status does not say why the status page is not served")
	}
	if code := register(t, udpListener(t, a), "1001", "demo1001"); code != sip.StatusOK {
		t.Fatalf("REGISTER with the status page unbound: %d", code)
	}
	// An unrelated push (a new user) keeps status.listen: accepted.
	d["users"] = append(d["users"].([]any), map[string]any{"extension": "1099", "password": "pw-1099"})
	if _, err := a.Apply(t.Context(), encode(t, d), "test", 0, false); err != nil {
		t.Fatalf("a push that keeps the unbindable status.listen is refused: %v", err)
	}
	// A push to another address binds it.
	d["status"] = map[string]any{"listen": "127.0.0.1:0"}
	if _, err := a.Apply(t.Context(), encode(t, d), "test", 0, false); err != nil {
		t.Fatal(err)
	}
	if a.status.Addr() == "" || a.status.Failure() != "" {
		t.Errorf("after a push to a free address: page %q, failure %q", a.status.Addr(), a.status.Failure())
	}
}

// TestStatusPageDirectory: the users are served as a phone directory on
// the status listener, behind the same check as the page, searchable,
// and a push shows at once.
func TestStatusPageDirectory(t *testing.T) {
	a := startApp(t, encode(t, testDoc(t)))
	addr := a.status.Addr()
	if code, auth, _ := statusGet(t, http.MethodGet, addr, "/directory/yealink", "", ""); code != http.StatusUnauthorized || !strings.HasPrefix(auth, "Basic ") {
		t.Fatalf("directory without credentials: %d %q, want a Basic challenge", code, auth)
	}
	list := func(q string) []directory.Entry {
		t.Helper()
		code, _, body := statusGet(t, http.MethodGet, addr, "/directory/json?q="+q, "1001", "demo1001")
		var es []directory.Entry
		if err := json.Unmarshal([]byte(body), &es); code != http.StatusOK || err != nil {
			t.Fatalf("directory ?q=%s: %d %v\n%s", q, code, err, body)
		}
		return es
	}
	if es := list(""); len(es) < 2 {
		t.Fatalf("directory lists %+v, want the document's users", es)
	}
	d := testDoc(t)
	users := d["users"].([]any)
	users[1].(map[string]any)["name"] = "Zoë <Night> & Day"
	if _, err := a.Apply(t.Context(), encode(t, d), "test", 0, false); err != nil {
		t.Fatal(err)
	}
	if es := list("zoë"); len(es) != 1 || es[0].Name != "Zoë <Night> & Day" || es[0].Extension != "1002" {
		t.Errorf("search for the renamed user after a push: %+v", es)
	}
	code, _, body := statusGet(t, http.MethodGet, addr, "/directory/cisco?q=1002", "1001", "demo1001")
	if code != http.StatusOK || !strings.Contains(body, "<Name>Zoë &lt;Night&gt; &amp; Day</Name>") || !strings.Contains(body, "<Telephone>1002</Telephone>") {
		t.Errorf("Cisco directory for 1002: %d\n%s", code, body)
	}
	if code, _, _ := statusGet(t, http.MethodGet, addr, "/directory/nokia", "1001", "demo1001"); code != http.StatusNotFound {
		t.Errorf("unknown directory format: %d, want 404", code)
	}
}
