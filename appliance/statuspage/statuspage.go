// Package statuspage is the box's local, read-only status page: one
// embedded HTML page with its CSS and JavaScript (no external asset, so it
// works with the WAN down) that polls the appliance's read-only JSON API
// from its own origin, all behind HTTP Basic for the users the document
// marks admin.
//
// The box stores no password, only digest HA1s (H(user:realm:password),
// RFC 7616 §3.4.2), so a Basic credential is checked by computing its HA1
// and comparing it, in constant time, with the stored one. Failed attempts
// are limited per client address, like the registrar's digest failures.
//
// The package serves; it does not listen. The appliance binds the
// listener (part_status.go) and swaps the admins on a push without
// rebinding. It does not offer client-certificate access: the management
// API (mutual TLS) is the remote interface.
package statuspage

import (
	"crypto/subtle"
	"embed"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/outpost/outpost/gateway/digest"
)

// Access is who may open the page: the digest realm the HA1s were computed
// in and the admin users.
type Access struct {
	Realm  string
	Admins []Admin
}

// Admin is one user with "admin": true: the extension (the Basic user
// name) and its stored HA1s, lowercase hex as config.Seal computes them.
type Admin struct {
	User      string
	HA1MD5    string
	HA1SHA256 string
}

// allows reports whether user and password are an admin's credentials. It
// takes about the same time whether or not user exists.
func (a *Access) allows(user, password string) bool {
	var want string
	alg := digest.MD5
	found := false
	for _, ad := range a.Admins {
		if ad.User == user {
			found = true
			want = strings.ToLower(ad.HA1MD5)
			if want == "" {
				alg, want = digest.SHA256, strings.ToLower(ad.HA1SHA256)
			}
			break
		}
	}
	got := digest.HA1(alg, user, a.Realm, password)
	if !found || want == "" {
		want = strings.Repeat("0", len(got)) // compare anyway: no timing signal
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 && found && want != ""
}

//go:embed assets
var assets embed.FS

// Basic auth refusals. The realm names the page, not the digest realm.
const (
	authRealm = `Basic realm="Outpost status", charset="UTF-8"`
	// failLimit failed attempts from one address within failWindow earn
	// 429 until the window ends: a guessing client gets a handful of
	// tries a minute, an admin who mistyped waits at most a minute.
	failLimit  = 10
	failWindow = time.Minute
	failMax    = 4096 // addresses remembered at once
)

// Handler serves the page at / and its assets, readAPI's read-only
// endpoints under /api/v1/ and dir (the phone directory) under
// /directory/, to the admins access returns (read on every request, so a
// push takes effect at once). Everything else is 404.
func Handler(readAPI, dir http.Handler, access func() *Access, log *slog.Logger) http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.Handle("/api/v1/", noStore(readAPI))
	mux.Handle("GET /directory/", dir)
	g := &guard{access: access, log: log, fails: map[string]*failures{}, now: time.Now}
	return g.wrap(headers(mux))
}

// headers are the security headers of every answer: nothing but the page's
// own origin may be loaded, framed or fetched.
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "+
			"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// guard lets admins through and counts everybody else's failures.
type guard struct {
	access func() *Access
	log    *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	fails map[string]*failures // by client address
}

type failures struct {
	n     int
	since time.Time
	// logged says this window's refusal was logged already.
	logged bool
}

func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			client = r.RemoteAddr
		}
		if g.blocked(client) {
			w.Header().Set("Retry-After", "60")
			http.Error(w, "too many failed logins; try again in a minute", http.StatusTooManyRequests)
			return
		}
		user, pw, ok := r.BasicAuth()
		if !ok || !g.access().allows(user, pw) {
			if ok {
				g.failed(client, user, r)
			}
			w.Header().Set("WWW-Authenticate", authRealm)
			http.Error(w, "an admin user's extension and SIP password are required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// blocked reports whether client has used up its failed attempts.
func (g *guard) blocked(client string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.fails[client]
	if f == nil {
		return false
	}
	if g.now().Sub(f.since) >= failWindow {
		delete(g.fails, client)
		return false
	}
	return f.n >= failLimit
}

// failed counts a wrong credential from client and logs the first refusal
// of each window that reaches the limit.
func (g *guard) failed(client, user string, r *http.Request) {
	now := g.now()
	g.mu.Lock()
	f := g.fails[client]
	if f == nil || now.Sub(f.since) >= failWindow {
		if f == nil && len(g.fails) >= failMax {
			for k, old := range g.fails {
				if now.Sub(old.since) >= failWindow {
					delete(g.fails, k)
				}
			}
		}
		if len(g.fails) >= failMax {
			g.mu.Unlock()
			return // a flood of addresses: they get 401s, not a bigger map
		}
		f = &failures{since: now}
		g.fails[client] = f
	}
	f.n++
	logNow := f.n >= failLimit && !f.logged
	f.logged = f.logged || logNow
	g.mu.Unlock()
	if logNow {
		g.log.Warn("status page: too many failed logins; refusing this client for a minute",
			"remote", r.RemoteAddr, "user", user)
	}
}
