package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/directory"
	"github.com/outpost/outpost/appliance/statuspage"
)

// statusPart is the local read-only status page (appliance/statuspage) on
// status.listen: plain HTTP, HTTP Basic for the document's admin users.
//
// The admins are swapped on commit without touching the listener; a new
// listen address is bound in prepare. At start a status page that cannot
// bind does not stop the box (SIP matters more than the page): the error
// is logged and shown in status, and every later push that keeps the
// address tries again without failing for it. A push that changes the
// address fails if the new one cannot be bound, like any part.
type statusPart struct {
	log     *slog.Logger
	handler http.Handler

	// cfg is what the handler serves: the admins and the directory.
	cfg atomic.Pointer[statusConfig]

	mu      sync.Mutex
	want    string // status.listen of the running document
	failure string // why want is not served ("" when it is, or is off)
	slot    httpSlot
}

func newStatusPart(b api.Backend, log *slog.Logger) *statusPart {
	s := &statusPart{log: log, slot: httpSlot{name: "status page", log: log}}
	s.cfg.Store(&statusConfig{})
	dir := directory.Handler(func() []directory.Entry { return s.cfg.Load().Directory })
	s.handler = statuspage.Handler(api.ReadOnlyHandler(b, log), dir, func() *statuspage.Access { return &s.cfg.Load().Access }, log)
	return s
}

// Limits of the status page's HTTP server: small GETs from a browser.
const (
	statusReadHeaderTimeout = 10 * time.Second
	statusWriteTimeout      = 30 * time.Second
	statusIdleTimeout       = 2 * time.Minute
	statusMaxHeaderBytes    = 16 << 10
)

// statusConfig is the status part's configuration: the listen address
// and who may open the page.
type statusConfig struct {
	Listen string
	Access statuspage.Access
	// Directory is the users as the phone directory lists them.
	Directory []directory.Entry
}

// MarshalJSON keeps HA1s out of golden files and logs.
func (c statusConfig) MarshalJSON() ([]byte, error) {
	var admins []string
	for _, a := range c.Access.Admins {
		admins = append(admins, a.User)
	}
	return json.Marshal(struct {
		Listen string
		Realm  string
		Admins []string `json:",omitempty"`
	}{c.Listen, c.Access.Realm, admins})
}

func (*statusPart) name() string { return "status" }

// prepare binds the new listener when status.listen changed; commit
// serves it and stops the old one, abort closes it. The admins change on
// commit either way.
func (s *statusPart) prepare(_ context.Context, next *partConfigs) (change, error) {
	sec := next.Status
	cfg := &sec
	s.mu.Lock()
	want := s.want
	s.mu.Unlock()
	up := s.slot.up()
	if sec.Listen == want && (up || sec.Listen == "") {
		return funcs{commit: func() { s.cfg.Store(cfg) }}, nil
	}
	if sec.Listen == "" {
		return funcs{commit: func() {
			s.cfg.Store(cfg)
			s.swap("", nil, nil, "")
		}}, nil
	}
	ln, err := net.Listen("tcp", sec.Listen)
	if err != nil {
		err = fmt.Errorf("listen %s: %w", sec.Listen, err)
		if sec.Listen != want {
			return nil, err
		}
		// The running document already asks for this address and it could
		// not be bound before either: a push that does not touch the status
		// page must not fail for it.
		return funcs{commit: func() {
			s.cfg.Store(cfg)
			s.fail(sec.Listen, err)
		}}, nil
	}
	srv := s.newServer()
	return funcs{
		commit: func() {
			s.cfg.Store(cfg)
			s.swap(sec.Listen, srv, ln, "")
		},
		abort: func() { ln.Close() },
	}, nil
}

// start serves first's status page, for New. A listener that cannot be
// bound is logged loudly and shown in status; the box runs without it.
func (s *statusPart) start(ctx context.Context, first *partConfigs) {
	c, err := s.prepare(ctx, first)
	if err != nil {
		s.cfg.Store(&first.Status)
		s.fail(first.Status.Listen, err)
		return
	}
	c.Commit()
}

// fail records that listen, asked for by the running document, is not served.
func (s *statusPart) fail(listen string, err error) {
	s.slot.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want, s.failure = listen, err.Error()
	s.log.Error("STATUS PAGE NOT SERVED: its listen address cannot be bound; SIP and everything else run on "+
		"(change status.listen, or free the port and push the document again)", "listen", listen, "err", err)
}

func (s *statusPart) newServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: statusReadHeaderTimeout,
		ReadTimeout:       statusReadHeaderTimeout,
		WriteTimeout:      statusWriteTimeout,
		IdleTimeout:       statusIdleTimeout,
		MaxHeaderBytes:    statusMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// swap records what the running document asks for and replaces the server.
func (s *statusPart) swap(listen string, srv *http.Server, ln net.Listener, failure string) {
	s.mu.Lock()
	s.want, s.failure = listen, failure
	s.mu.Unlock()
	s.slot.swap(srv, ln)
}

// Addr is the bound address of the status page, "" when there is none.
func (s *statusPart) Addr() string { return s.slot.Addr() }

// Failure is why status.listen is not served, "" when it is or is off.
func (s *statusPart) Failure() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// Stop closes the listener and waits for its goroutine.
func (s *statusPart) Stop() { s.slot.Stop() }
