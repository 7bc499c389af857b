package statuspage

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/digest"
)

func testAccess() *Access {
	const realm = "branch.example.com"
	return &Access{Realm: realm, Admins: []Admin{
		{User: "1001", HA1MD5: digest.HA1(digest.MD5, "1001", realm, "pw-1001"), HA1SHA256: digest.HA1(digest.SHA256, "1001", realm, "pw-1001")},
		{User: "1002", HA1SHA256: digest.HA1(digest.SHA256, "1002", realm, "pw-1002")}, // SHA-256 only
		{User: "1003", HA1MD5: strings.ToUpper(digest.HA1(digest.MD5, "1003", realm, "pw-1003"))},
	}}
}

func TestAllows(t *testing.T) {
	a := testAccess()
	for _, tc := range []struct {
		user, pw string
		want     bool
	}{
		{"1001", "pw-1001", true},
		{"1001", "pw-1002", false},
		{"1001", "", false},
		{"1002", "pw-1002", true},
		{"1003", "pw-1003", true}, // upper-case hex stored
		{"1004", "pw-1004", false},
		{"", "", false},
	} {
		if got := a.allows(tc.user, tc.pw); got != tc.want {
			t.Errorf("allows(%q, %q) = %v, want %v", tc.user, tc.pw, got, tc.want)
		}
	}
	if (&Access{}).allows("", "") {
		t.Error("no admins allows the empty credential")
	}
}

// TestHandler: the page, its assets and the API behind Basic; nothing else.
func TestHandler(t *testing.T) {
	readAPI := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"mode":"normal"}`) })
	a := testAccess()
	h := Handler(readAPI, http.NotFoundHandler(), func() *Access { return a }, slog.New(slog.DiscardHandler))
	get := func(path, user, pw string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if user != "" {
			r.SetBasicAuth(user, pw)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, p := range []string{"/", "/assets/app.js", "/assets/style.css", "/api/v1/status"} {
		if w := get(p, "", ""); w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("GET %s without credentials: %d %q", p, w.Code, w.Header().Get("WWW-Authenticate"))
		}
		w := get(p, "1001", "pw-1001")
		if w.Code != http.StatusOK {
			t.Errorf("GET %s as admin: %d", p, w.Code)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
	}
	if w := get("/", "1001", "pw-1001"); !strings.Contains(w.Body.String(), `src="/assets/app.js"`) {
		t.Errorf("the page does not load its script:\n%s", w.Body)
	}
	if w := get("/nope", "1001", "pw-1001"); w.Code != http.StatusNotFound {
		t.Errorf("GET /nope: %d", w.Code)
	}
	// The page needs nothing from elsewhere: no absolute URL in the assets.
	for _, f := range []string{"assets/index.html", "assets/app.js", "assets/style.css"} {
		b, err := assets.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); strings.Contains(s, "http://") || strings.Contains(s, "https://") || strings.Contains(s, "//cdn") {
			t.Errorf("%s refers to an external URL", f)
		}
	}
}

// TestFailedLoginsLimited: failLimit wrong credentials from one address
// earn 429, also for right ones, until failWindow has passed; other
// addresses are not affected.
func TestFailedLoginsLimited(t *testing.T) {
	a := testAccess()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	g := &guard{access: func() *Access { return a }, log: slog.New(slog.DiscardHandler), fails: map[string]*failures{},
		now: func() time.Time { return now }}
	h := g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	try := func(from, pw string) int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = from + ":40000"
		r.SetBasicAuth("1001", pw)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range failLimit {
		if code := try("198.18.0.10", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	if code := try("198.18.0.10", "pw-1001"); code != http.StatusTooManyRequests {
		t.Errorf("right password after %d failures: %d, want 429", failLimit, code)
	}
	if code := try("198.18.0.11", "pw-1001"); code != http.StatusOK {
		t.Errorf("another address: %d", code)
	}
	now = now.Add(failWindow)
	if code := try("198.18.0.10", "pw-1001"); code != http.StatusOK {
		t.Errorf("after the window: %d", code)
	}
}
