package b2bua

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// Contact is one live registrar binding of an extension.
type Contact struct {
	URI       string // "sip:1002@198.18.0.20:5062": the Request-URI of the B leg
	Transport string // "udp" or "tcp"; "" = udp
	Addr      string // "198.18.0.20:5062": where the REGISTER came from (NAT); requests go there
}

// Locator gives the registrar's live bindings of an extension.
type Locator interface {
	Contacts(extension string) []Contact
}

// Router decides where a dialled number goes (a dialplan.Plan in the
// current mode).
type Router interface {
	Outbound(number string) (dialplan.Decision, bool)
}

// Config is the B2BUA's configuration; the zero value is usable for
// everything but PSTN calls.
// Trunk is the HQ pool: the targets to try for a call, in order (RFC 3263
// resolution and health ordering are the trunk's business), and the
// outcome of each attempt (passive health).
type Trunk interface {
	Targets(ctx context.Context) ([]string, error) // "udp:198.18.1.10:5060"
	Report(target string, status int, err error)   // status 0 = no final response
}

type Config struct {
	// PSTNGateways are tried in order: "udp:198.18.3.2:5060",
	// "tcp:host:port" or plain "host:port" (udp).
	PSTNGateways []string
	// RingTimeout bounds the time from the INVITE to an answer; then the
	// B legs are cancelled and the caller gets 480. 0 = 60 s.
	RingTimeout time.Duration
	// AttemptTimeout bounds the wait for the first response from one
	// target (no response = move on / give up). 0 = 4 s.
	AttemptTimeout time.Duration
	// ContactHost is host:port for our Contact header on both legs.
	// "" = the address of the listener the A-leg INVITE arrived on.
	ContactHost string
	// LocalAddr is the UDP listener ("ip:port") that B-leg requests leave
	// from. "" = the listener the A-leg INVITE arrived on.
	LocalAddr string
	// HQ is the HQ pool for route "hq"; nil = calls to HQ get 503.
	HQ Trunk
}

const (
	defaultRingTimeout    = 60 * time.Second
	defaultAttemptTimeout = 4 * time.Second
	// byeTimeout bounds one BYE sent by the B2BUA.
	byeTimeout = 5 * time.Second
)

// Call states reported by Calls.
const (
	StateRouting  = "routing"  // INVITE received, B legs being set up
	StateRinging  = "ringing"  // a provisional response was relayed
	StateAnswered = "answered" // a B leg answered; the call is up
)

// CallInfo describes one active call.
type CallInfo struct {
	ID       string // A-leg Call-ID
	From     string // caller (A-leg From user)
	To       string // the dialled number (A-leg Request-URI user)
	Target   string // the number after the dial plan
	Route    dialplan.Route
	State    string
	Started  time.Time
	Answered time.Time // zero until answered
}

type gateway struct {
	transport string // "UDP" / "TCP"
	hostport  string
	host      string
	port      int
}

// B2BUA routes calls between the A leg (the caller, UAS side) and one or
// more B legs (UAC side). It is safe for concurrent use.
type B2BUA struct {
	loc    Locator
	router Router
	log    *slog.Logger
	client *sipgo.Client
	// set is the configuration new calls start with; a call keeps the one it
	// started with, so Reconfigure never changes a call in progress.
	set atomic.Pointer[settings]

	inflight atomic.Int64 // handlers running (tests wait for 0 before closing sockets)

	mu     sync.Mutex
	calls  map[string]*call // by A-leg dialog ID
	bCalls map[string]*call // by B-leg dialog ID (the winner)
}

// New checks cfg and builds a B2BUA that sends through ua.
func New(ua *sipgo.UserAgent, cfg Config, loc Locator, r Router, log *slog.Logger) (*B2BUA, error) {
	if ua == nil || loc == nil || r == nil {
		return nil, errors.New("b2bua: user agent, locator and router are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &B2BUA{
		loc: loc, router: r, log: log,
		calls:  map[string]*call{},
		bCalls: map[string]*call{},
	}
	if err := b.Reconfigure(cfg); err != nil {
		return nil, err
	}
	cli, err := sipgo.NewClient(ua)
	if err != nil {
		return nil, fmt.Errorf("b2bua: client: %w", err)
	}
	b.client = cli
	return b, nil
}

// settings is one Config, parsed.
type settings struct {
	cfg      Config
	gateways []gateway
	contact  *sip.Uri  // parsed ContactHost, nil = per call
	laddr    *sip.Addr // parsed LocalAddr, nil = per call
}

// Reconfigure checks cfg and makes it the configuration of the next call;
// calls in progress keep theirs.
func (b *B2BUA) Reconfigure(cfg Config) error {
	if cfg.RingTimeout <= 0 {
		cfg.RingTimeout = defaultRingTimeout
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = defaultAttemptTimeout
	}
	s := &settings{cfg: cfg}
	for i, g := range cfg.PSTNGateways {
		gw, err := parseGateway(g)
		if err != nil {
			return fmt.Errorf("b2bua: pstn gateway %d: %w", i, err)
		}
		s.gateways = append(s.gateways, gw)
	}
	if cfg.ContactHost != "" {
		host, port, err := sip.ParseAddr(cfg.ContactHost)
		if err != nil {
			return fmt.Errorf("b2bua: contact host %q: %w", cfg.ContactHost, err)
		}
		s.contact = &sip.Uri{Scheme: "sip", Host: host, Port: port}
	}
	if cfg.LocalAddr != "" {
		a, err := parseIPAddr(cfg.LocalAddr)
		if err != nil {
			return fmt.Errorf("b2bua: local addr: %w", err)
		}
		s.laddr = &a
	}
	b.set.Store(s)
	return nil
}

func parseGateway(s string) (gateway, error) {
	tr := "UDP"
	if p, rest, ok := strings.Cut(s, ":"); ok {
		switch strings.ToLower(p) {
		case "udp", "tcp":
			tr, s = strings.ToUpper(p), rest
		}
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return gateway{}, fmt.Errorf("%q: %w", s, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 {
		return gateway{}, fmt.Errorf("%q: bad port", s)
	}
	return gateway{transport: tr, hostport: s, host: host, port: n}, nil
}

func parseIPAddr(s string) (sip.Addr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return sip.Addr{}, fmt.Errorf("%q: %w", s, err)
	}
	ip := net.ParseIP(host)
	n, err := strconv.Atoi(port)
	if ip == nil || err != nil || n <= 0 || n > 65535 {
		return sip.Addr{}, fmt.Errorf("%q: want ip:port", s)
	}
	return sip.Addr{IP: ip, Port: n}, nil
}

// Calls lists the active calls, oldest first.
func (b *B2BUA) Calls() []CallInfo {
	b.mu.Lock()
	out := make([]CallInfo, 0, len(b.calls))
	for _, c := range b.calls {
		out = append(out, c.info)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y CallInfo) int { return x.Started.Compare(y.Started) })
	return out
}

func (b *B2BUA) remove(c *call) {
	b.mu.Lock()
	if b.calls[c.aID] == c {
		delete(b.calls, c.aID)
	}
	if c.bID != "" && b.bCalls[c.bID] == c {
		delete(b.bCalls, c.bID)
	}
	b.mu.Unlock()
}

func respond(tx sip.ServerTransaction, req *sip.Request, code int, reason string) {
	_ = tx.Respond(sip.NewResponseFromRequest(req, code, reason, nil))
}

// OnInvite handles an initial INVITE (the A leg). It blocks until the A
// leg has its final response (and, for a 2xx, its ACK) and every B leg of
// the call has ended or been answered. Re-INVITEs are refused with 488.
func (b *B2BUA) OnInvite(req *sip.Request, tx sip.ServerTransaction) {
	b.handleInvite(req, tx, b.router.Outbound)
}

// OnInboundInvite handles an initial INVITE that the gateway has already
// routed: a call from a PSTN gateway to a DID, resolved to an extension by
// the inbound rules. Otherwise it behaves as OnInvite.
func (b *B2BUA) OnInboundInvite(req *sip.Request, tx sip.ServerTransaction, d dialplan.Decision) {
	b.handleInvite(req, tx, func(string) (dialplan.Decision, bool) { return d, true })
}

func (b *B2BUA) handleInvite(req *sip.Request, tx sip.ServerTransaction, route func(number string) (dialplan.Decision, bool)) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	if to := req.To(); to != nil && to.Params.Has("tag") {
		respond(tx, req, 488, "Not Acceptable Here") // re-INVITE: not yet supported
		return
	}
	respond(tx, req, 100, "Trying")

	set := b.set.Load()
	arrived, laddr, contact, err := b.localFor(set, tx)
	if err != nil {
		b.log.Warn("b2bua: no local address for call", "err", err)
		respond(tx, req, 500, "Server Internal Error")
		return
	}
	dua := &sipgo.DialogUA{
		Client:         b.client,
		ContactHDR:     sip.ContactHeader{Address: contact},
		RewriteContact: true,
	}
	a, err := dua.ReadInvite(req, tx)
	if err != nil {
		respond(tx, req, 400, "Bad Request")
		return
	}
	if mf := req.MaxForwards(); mf != nil && mf.Val() == 0 {
		_ = a.Respond(483, "Too Many Hops", nil)
		return
	}
	number := req.Recipient.User
	d, ok := route(number)
	if !ok || d.Route == "" {
		_ = a.Respond(404, "Not Found", nil)
		return
	}

	if d.Route == dialplan.RouteHQ && set.cfg.HQ == nil || d.Route == dialplan.RoutePSTN && len(set.gateways) == 0 {
		_ = a.Respond(503, "Service Unavailable", nil) // no trunk for this route
		return
	}
	c := newCall(b, set, dua, a, req, d, arrived, laddr, contact)
	b.mu.Lock()
	b.calls[c.aID] = c
	b.mu.Unlock()
	if !c.run() {
		b.remove(c)
	}
}

// localFor returns the listener the A leg arrived on, the listener B legs
// leave from and our Contact URI.
func (b *B2BUA) localFor(set *settings, tx sip.ServerTransaction) (arrived, laddr *sip.Addr, contact sip.Uri, err error) {
	udp := false
	if stx, ok := tx.(*sip.ServerTx); ok && stx.Connection() != nil {
		switch a := stx.Connection().LocalAddr().(type) {
		case *net.UDPAddr:
			if a.IP != nil && !a.IP.IsUnspecified() {
				arrived, udp = &sip.Addr{IP: a.IP, Port: a.Port}, true
			}
		case *net.TCPAddr:
			if a.IP != nil && !a.IP.IsUnspecified() {
				arrived = &sip.Addr{IP: a.IP, Port: a.Port}
			}
		}
	}
	laddr = set.laddr
	if laddr == nil && udp {
		laddr = arrived // only a UDP listener can be reused for B legs
	}
	if set.contact != nil {
		return arrived, laddr, *set.contact, nil
	}
	src := laddr
	if src == nil {
		src = arrived
	}
	if src == nil {
		return nil, nil, sip.Uri{}, errors.New("set Config.ContactHost")
	}
	return arrived, laddr, sip.Uri{Scheme: "sip", Host: src.IP.String(), Port: src.Port}, nil
}

// OnAck handles an ACK outside any transaction: the A leg's ACK for our
// 2xx, which is forwarded to the winning B leg.
func (b *B2BUA) OnAck(req *sip.Request, tx sip.ServerTransaction) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	id, err := sip.DialogIDFromRequestUAS(req)
	if err != nil {
		return
	}
	b.mu.Lock()
	c := b.calls[id]
	b.mu.Unlock()
	if c == nil {
		return
	}
	c.onAck(req, tx)
}

// OnBye handles a BYE from either leg: 200 to the sender, BYE to the other
// leg, and the call is removed.
func (b *B2BUA) OnBye(req *sip.Request, tx sip.ServerTransaction) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	var c *call
	var fromA bool
	if id, err := sip.DialogIDFromRequestUAS(req); err == nil {
		b.mu.Lock()
		c, fromA = b.calls[id], true
		b.mu.Unlock()
	}
	if c == nil {
		if id, err := sip.DialogIDFromRequestUAC(req); err == nil {
			b.mu.Lock()
			c, fromA = b.bCalls[id], false
			b.mu.Unlock()
		}
	}
	if c == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist")
		return
	}
	c.onBye(req, tx, fromA)
}

// errorStatus returns the status of a failed B leg; 0 = no final response.
func errorStatus(err error) int {
	var de *sipgo.ErrDialogResponse
	if errors.As(err, &de) && de.Res != nil {
		return de.Res.StatusCode
	}
	return 0
}

func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
