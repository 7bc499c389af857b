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
	"golang.org/x/time/rate"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/siptarget"
)

// Contact is one live registrar binding of an extension.
type Contact struct {
	URI       string // "sip:1002@198.18.0.20:5062": the Request-URI of the B leg
	Transport string // "udp" or "tcp"; "" = udp
	Addr      string // "198.18.0.20:5062": where the REGISTER came from (NAT); requests go there
	// Local is the box's UDP listener ("ip:port") the REGISTER arrived on:
	// calls to the contact leave from it (a NAT lets in only what comes
	// from the address the phone registered to). "" = unknown: LocalFor,
	// LocalAddr or the A leg's listener, as for other targets.
	Local string
	// FlowFailed: the contact registered with RFC 5626 outbound and the
	// connection it registered over is gone. It is not called (a new
	// connection would not reach it; RFC 5626 §5.3) and counts as a 430
	// Flow Failed answer.
	FlowFailed bool
}

// Locator gives the registrar's live bindings of an extension.
type Locator interface {
	Contacts(extension string) []Contact
}

// PoolLocator is an optional interface of the Locator: in a registrar
// pool, the other members that may hold a binding of an extension that
// has none here, in the extension's order. They are rung like contacts
// (at once; the member holding the binding rings its phone, the others
// answer 480), and their INVITEs are signed (Config.SignPool). A call that
// came from a member (Decision.Rule RuleFromPool) is never sent on to
// another: a member answers it from its own bindings.
type PoolLocator interface {
	PoolContacts(extension string) []Contact
}

// RuleFromPool is the Decision.Rule of a call another pool member sent.
const RuleFromPool = "from-pool"

// Router decides where a dialled number goes (a dialplan.Plan in the
// current mode).
type Router interface {
	Outbound(number string) (dialplan.Decision, bool)
	// Voicemail routes the voicemail pilot for a local extension whose
	// call was not taken (no answer, busy, unreachable); ok is false when
	// the extension has no voicemail or no pilot is configured. The
	// implementation routes the pilot through the dial plan of the current
	// mode (in survivable mode that is the PSTN).
	Voicemail(extension string) (dialplan.Decision, bool)
}

// HQFallback is an optional interface of the Router: the per-call
// fallback of a call routed to HQ whose every target failed by the retry
// rule (408, 503, 504, no response, transport error) or that has no target
// at all. ok is false when there is none (hq.call_fallback off, or the
// number has no route outside HQ): the caller then gets HQ's answer.
type HQFallback interface {
	HQFallback(number string) (dialplan.Decision, bool)
}

// Trunk is the HQ pool: the targets to try for a call, in order (RFC 3263
// resolution and health ordering are the trunk's business), and the
// outcome of each attempt (passive health).
type Trunk interface {
	Targets(ctx context.Context) ([]string, error) // "udp:198.18.1.10:5060"
	Report(target string, status int, err error)   // status 0 = no final response
}

// RequestHoster is a Trunk that names the host of a B leg's Request-URI
// (and To) per target: the HQ domain, so a domain-routed HQ (a Lync pool)
// takes the call as its own while the target is only the next hop; ""
// = the target's address.
type RequestHoster interface {
	RequestHost(target string) string
}

// BackupPool is a Trunk with a backup pool: Backup reports whether a
// target is the backup's (Config.HQBackupFailover applies to it).
type BackupPool interface {
	Backup(target string) bool
}

// Connector is a Trunk that prepares the transport to a target before a
// B leg's INVITE (the gateway opens its TLS connections to HQ itself, to
// verify and name each target); an error fails the attempt like a
// transport error.
type Connector interface {
	Connect(ctx context.Context, target string) error
}

// TLSRedirector is a Trunk that follows HQ's redirects over TLS: it opens
// a connection to a Contact's "host:port", verified for the host with
// HQ's trust (resolving a name with HQ's DNS), and returns the address
// reached ("ip:port"), where the B leg goes.
type TLSRedirector interface {
	ConnectRedirect(ctx context.Context, hostport string) (string, error)
}

// Config is the B2BUA's configuration; the zero value is usable for
// everything but PSTN and HQ calls.
type Config struct {
	// PSTNGateways are tried in order (udp or tcp; the gateway refuses
	// tls for them: its TLS client configuration is HQ's).
	PSTNGateways []siptarget.Target
	// PSTNHealth, when set, is the health of the PSTN gateways, keyed by
	// siptarget.Target.String() ("udp:198.18.2.10:5060"): a call tries
	// the eligible gateways in the configured order and, when every one
	// is blocked or down, one of them at random (health.Tracker.Pick,
	// docs/design.md §1); each attempt's outcome feeds it by the retry rule
	// (health.ClassifyAttempt: 408, 503, 504, no response or a transport
	// error block the gateway). nil = every gateway, in order, always.
	PSTNHealth *health.Tracker `json:"-"`
	// Warning, when set, gives the value of a Warning header (RFC 3261
	// §20.43) added to every final response to an initial INVITE; "" =
	// none. It is read per response: the gateway's mode (survivable) may
	// change while a call rings.
	Warning func() string `json:"-"`
	// RingTimeout bounds the time from the INVITE to an answer; then the
	// B legs are cancelled and the caller gets 480. 0 = 60 s.
	RingTimeout time.Duration
	// AttemptTimeout bounds the wait for the first response from one
	// target (no response = move on / give up). 0 = 4 s.
	AttemptTimeout time.Duration
	// HQFailover and PSTNFailover are the failover limits of the HQ
	// route's targets and of the PSTN gateways; HQBackupFailover, when
	// set, those of the targets a BackupPool Trunk names its backup's.
	HQFailover, PSTNFailover Failover
	HQBackupFailover         *Failover
	// VoicemailAfter is the ring time of a local user with voicemail
	// (Router.Voicemail) before the call goes to the pilot. 0 = 20 s.
	VoicemailAfter time.Duration
	// KeepAlive is the interval of the in-dialog OPTIONS sent to both legs
	// of an answered call; 408, 481 or no answer (within the interval,
	// at most 32 s) ends the call as Dead. 0 = 90 s; negative = off.
	KeepAlive time.Duration
	// SessionExpires is the RFC 4028 session interval, in seconds, the
	// box asks of a callee (and uses on the caller's dialog) when the
	// caller sent no Session-Expires; the box refreshes a dialog whose
	// peer keeps no timer itself. 0 = 1800; negative = none of the box's
	// own (a caller's or callee's timer is still honoured); at least 90
	// (RFC 4028 §4).
	SessionExpires int
	// MaxCalls bounds the calls in progress (ringing or answered); a new
	// INVITE beyond it gets 503 with Retry-After, so a flood cannot grow
	// the box's memory without bound. 0 = 4000; negative = no limit.
	MaxCalls int
	// ContactHost is host:port for our Contact header on both legs.
	// "" = the address of the listener the A-leg INVITE arrived on.
	ContactHost string
	// LocalAddr is the UDP listener ("ip:port") that B-leg requests leave
	// from. "" = the listener the A-leg INVITE arrived on.
	LocalAddr string
	// HQ is the HQ pool for route "hq"; nil = calls to HQ get 503.
	HQ Trunk `json:"-"`
	// SignPool signs an INVITE to another registrar pool member
	// (PoolLocator) once its headers are set; nil = unsigned.
	SignPool func(*sip.Request) `json:"-"`
	// Media makes the Anchor of each bridge; nil = SDP passes through
	// untouched (apart from the o= line after a transfer, see
	// party.outSDP).
	Media MediaFunc `json:"-"`
	// Groups are the hunt groups, by their extensions (which the dial
	// plan routes local).
	Groups []Group
	// Bosses are the users with delegates (delegation.go).
	Bosses []Boss
	// PickupGroups are the users who may pick up each other's ringing
	// calls with the group pickup code (pickup.go).
	PickupGroups [][]string
	// Park is call park (park.go); nil = off.
	Park *Park
	// Services, when set, are the users' do-not-disturb and forwards,
	// and the feature codes that change them are served (featurecode.go);
	// nil = neither.
	Services ServiceStore `json:"-"`
	// Voicemail, when set, is the box's own voicemail, for the users the
	// Router's BoxVoicemail names (voicemail.go); it needs Media. nil =
	// only the pilot.
	Voicemail Mailboxes `json:"-"`
	// Offline, when set, keeps a message for a local user with no phone
	// registered (answered 202; an error = 480); nil = 480.
	Offline func(OfflineMessage) error `json:"-"`
	// LocalFor, when set, picks the UDP listener a B leg to dest
	// ("ip:port") leaves from — the one on the interface facing it — and
	// the Anchor's address facing that leg; nil = LocalAddr, else the
	// listener the A leg arrived on.
	LocalFor func(dest string) *sip.Addr `json:"-"`
	// StreamFor, when set, picks the box's TCP or TLS listener (transport
	// "TCP", "TLS") facing a B leg to dest over that transport, which our
	// Contact then names with its transport, so the peer's requests in
	// the dialog come back over TCP or TLS (an HQ that speaks only TLS);
	// nil, or no such listener = as LocalFor.
	StreamFor func(transport, dest string) *sip.Addr `json:"-"`
	// OnEnd receives the CDR of every call, once, when it ends. It runs on
	// the goroutine that ended the call: keep it short.
	OnEnd func(CDR) `json:"-"`
}

const (
	defaultRingTimeout    = 60 * time.Second
	defaultAttemptTimeout = 4 * time.Second
	defaultVoicemailAfter = 20 * time.Second
	defaultKeepAlive      = 90 * time.Second
	// byeTimeout bounds one BYE (or NOTIFY) sent by the B2BUA.
	byeTimeout = 5 * time.Second
	// loopHeader carries a per-call token on every INVITE we send; an
	// INVITE that comes back with the token of a live call is a loop (482).
	loopHeader = "X-Outpost-Loop"
)

// Call states reported by Calls.
const (
	StateRouting  = "routing"  // INVITE received, B legs being set up
	StateRinging  = "ringing"  // a provisional response was relayed
	StateAnswered = "answered" // a B leg answered; the call is up
	StateParked   = "parked"   // in an orbit, waiting to be retrieved (park.go)
	StateQueued   = "queued"   // answered by the box, waiting for a group member (queue.go)
	// StateVoicemail (voicemail.go): answered by the box's voicemail.
)

// CallInfo describes one active call.
type CallInfo struct {
	ID       string // A-leg Call-ID (a generated one for a transfer bridge)
	From     string // caller (A-leg From user)
	To       string // the dialled number (A-leg Request-URI user)
	Target   string // the number after the dial plan
	Route    dialplan.Route
	State    string
	Started  time.Time
	Answered time.Time // zero until answered
}

// B2BUA routes calls between the A leg (the caller, UAS side) and one or
// more B legs (UAC side). It is safe for concurrent use.
type B2BUA struct {
	loc    Locator
	router Router
	log    *slog.Logger
	client *sipgo.Client
	acks   *ackStore // our ACKs of 2xx responses, for their retransmissions (acks.go)
	// set is the configuration new calls start with, with router, unless
	// follow gives their Policy; a call keeps the one it started with, so
	// Reconfigure never changes a call in progress.
	set    atomic.Pointer[Settings]
	follow atomic.Pointer[func() Policy]

	inflight atomic.Int64 // handlers and call goroutines running (tests wait for 0)

	mu      sync.Mutex
	calls   map[string]*call  // active calls: initial calls by A-leg dialog ID, transfer bridges by "xfer:ID"
	parties map[string]*party // answered dialogs by (Call-ID, our tag, their tag)
	loops   map[string]*call  // loop tokens of active calls
	merged  map[string]*call  // mergeKey of initial INVITEs being set up
	drain   drain             // see drain.go
	ending  int               // calls unlisted whose end (BYEs, CDR) still runs

	msgs   messageRate            // instant messages per sender (message.go)
	groups map[string]*groupState // hunt groups' turns and idle times, by extension (groups.go)
	watch  watchers               // subscriptions to local users' state (subscribe.go)
	parks  parkLot                // parked calls by orbit (park.go)
	// callEnded fires when a call ends: a group member may be free (queue.go).
	callEnded wakeup
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
		calls:   map[string]*call{},
		parties: map[string]*party{},
		loops:   map[string]*call{},
		merged:  map[string]*call{},
		acks:    newAckStore(time.Now),
		msgs:    messageRate{now: time.Now, m: map[string]*rate.Limiter{}},
		groups:  map[string]*groupState{},
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

// Settings is one Config, checked and parsed by Prepare.
type Settings struct {
	cfg        Config
	groups     map[string]*Group
	bosses     map[string]*Boss // by the boss's extension
	delegateOf map[string]*Boss // a delegate's first boss
	gateways   []siptarget.Target
	contact    *sip.Uri  // parsed ContactHost, nil = per call
	laddr      *sip.Addr // parsed LocalAddr, nil = per call
}

// maxCalls is Config.MaxCalls with its default.
func (s *Settings) maxCalls() int {
	switch {
	case s.cfg.MaxCalls == 0:
		return defaultMaxCalls
	case s.cfg.MaxCalls < 0:
		return 0
	}
	return s.cfg.MaxCalls
}

// defaultMaxCalls: about 100 MiB of live state at the ~25 KiB per call
// measured with 1000 concurrent calls (bench/RESULTS.md).
const defaultMaxCalls = 4000

// Policy is what a new call is set up under: the Settings of one push
// and a Router of the same push, so that a call never mixes two (routed by
// one dial plan, dialled over another push's HQ trunk).
type Policy struct {
	Settings *Settings
	Router   Router
}

// Follow makes current the source of the Policy of the calls the B2BUA is
// not handed one for: OnInvite's, and the bridges transfers make. Without
// it, the Settings of the last Reconfigure and the Router given to New.
func (b *B2BUA) Follow(current func() Policy) { b.follow.Store(&current) }

func (b *B2BUA) current() Policy {
	if f := b.follow.Load(); f != nil {
		return (*f)()
	}
	return Policy{Settings: b.set.Load(), Router: b.router}
}

// Reconfigure checks cfg and makes it the configuration of the next call;
// calls in progress keep theirs.
func (b *B2BUA) Reconfigure(cfg Config) error {
	set, err := Prepare(cfg)
	if err != nil {
		return err
	}
	b.set.Store(set)
	return nil
}

// Prepare checks cfg and parses it, for the calls a Policy hands it to.
func Prepare(cfg Config) (*Settings, error) {
	if cfg.RingTimeout <= 0 {
		cfg.RingTimeout = defaultRingTimeout
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = defaultAttemptTimeout
	}
	if cfg.VoicemailAfter <= 0 {
		cfg.VoicemailAfter = defaultVoicemailAfter
	}
	switch {
	case cfg.KeepAlive == 0:
		cfg.KeepAlive = defaultKeepAlive
	case cfg.KeepAlive < 0:
		cfg.KeepAlive = 0
	}
	if cfg.SessionExpires > 0 && cfg.SessionExpires < minSE {
		return nil, fmt.Errorf("b2bua: session expires %d s: below RFC 4028's minimum of %d s", cfg.SessionExpires, minSE)
	}
	s := &Settings{cfg: cfg, groups: groupsOf(cfg.Groups)}
	s.bosses, s.delegateOf = bossesOf(cfg.Bosses)
	for i, g := range cfg.PSTNGateways {
		if g.Transport != siptarget.UDP && g.Transport != siptarget.TCP || g.Port == 0 {
			return nil, fmt.Errorf("b2bua: pstn gateway %d %s: transport %q not supported (want udp or tcp)", i, g, g.Transport)
		}
		s.gateways = append(s.gateways, g)
	}
	if cfg.ContactHost != "" {
		host, port, err := sip.ParseAddr(cfg.ContactHost)
		if err != nil {
			return nil, fmt.Errorf("b2bua: contact host %q: %w", cfg.ContactHost, err)
		}
		s.contact = &sip.Uri{Scheme: "sip", Host: host, Port: port}
	}
	if cfg.LocalAddr != "" {
		a, err := parseIPAddr(cfg.LocalAddr)
		if err != nil {
			return nil, fmt.Errorf("b2bua: local addr: %w", err)
		}
		s.laddr = &a
	}
	return s, nil
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
	calls := make([]*call, 0, len(b.calls))
	for _, c := range b.calls {
		calls = append(calls, c)
	}
	b.mu.Unlock()
	out := make([]CallInfo, 0, len(calls))
	for _, c := range calls {
		c.mu.Lock() // not under b.mu: see doc.go, "State and locks"
		out = append(out, c.info)
		c.mu.Unlock()
	}
	slices.SortFunc(out, func(x, y CallInfo) int { return x.Started.Compare(y.Started) })
	return out
}

// addCall lists a call and its loop token.
func (b *B2BUA) addCall(c *call) {
	b.mu.Lock()
	b.calls[c.key] = c
	b.loops[c.token] = c
	b.mu.Unlock()
}

// removeCall forgets a call; its parties are forgotten as they leave. A
// drain still counts it until endDone: the call is over for the box once
// its BYEs are answered and its CDR is out, not when it leaves the list
// (a box that stopped there would cut the last 200 to BYE, or the BYE).
func (b *B2BUA) removeCall(c *call) {
	b.mu.Lock()
	if b.calls[c.key] == c {
		delete(b.calls, c.key)
	}
	if b.loops[c.token] == c {
		delete(b.loops, c.token)
	}
	b.mu.Unlock()
}

// register makes answered dialogs reachable by in-dialog requests.
func (b *B2BUA) register(ps ...*party) {
	b.mu.Lock()
	for _, p := range ps {
		b.parties[p.key] = p
	}
	b.mu.Unlock()
}

func (b *B2BUA) forget(p *party) {
	b.mu.Lock()
	if b.parties[p.key] == p {
		delete(b.parties, p.key)
	}
	b.mu.Unlock()
}

// partyOf finds the dialog an in-dialog request belongs to: its To tag is
// ours, its From tag the party's.
func (b *B2BUA) partyOf(req *sip.Request) *party {
	id, err := sip.DialogIDFromRequestUAS(req)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.parties[id]
}

// partyByDialog finds a dialog by Call-ID and its two tags in either
// order (RFC 3891 names them from the transferor's side of the dialog).
func (b *B2BUA) partyByDialog(callID, tag1, tag2 string) *party {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.parties[sip.DialogIDMake(callID, tag1, tag2)]; p != nil {
		return p
	}
	return b.parties[sip.DialogIDMake(callID, tag2, tag1)]
}

// warnings is the Warning header of the final answers to initial INVITEs
// (Config.Warning), if one is due now.
func (s *Settings) warnings() []sip.Header {
	if s.cfg.Warning == nil {
		return nil
	}
	if w := s.cfg.Warning(); w != "" {
		return []sip.Header{sip.NewHeader("Warning", w)}
	}
	return nil
}

func addHeaders(res *sip.Response, hdrs []sip.Header) {
	for _, h := range hdrs {
		res.AppendHeader(h)
	}
}

// respondWarn answers an initial INVITE with a final status, extra
// headers and the Warning of set.
func respondWarn(set *Settings, tx sip.ServerTransaction, req *sip.Request, code int, reason string, hdrs ...sip.Header) {
	res := sip.NewResponseFromRequest(req, code, reason, nil)
	addHeaders(res, hdrs)
	addHeaders(res, set.warnings())
	_ = tx.Respond(res)
}

func respond(tx sip.ServerTransaction, req *sip.Request, code int, reason string) {
	if reason == "" {
		reason = reasonPhrase(code)
	}
	_ = tx.Respond(sip.NewResponseFromRequest(req, code, reason, nil))
}

// reasonPhrase is the RFC 3261 §21 phrase of the codes this package sends.
func reasonPhrase(code int) string {
	switch code {
	case 100:
		return "Trying"
	case 200:
		return "OK"
	case 202:
		return "Accepted"
	case 400:
		return "Bad Request"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 408:
		return "Request Timeout"
	case 413:
		return "Request Entity Too Large"
	case 415:
		return "Unsupported Media Type"
	case 480:
		return "Temporarily Unavailable"
	case 481:
		return "Call/Transaction Does Not Exist"
	case 482:
		return "Loop Detected"
	case 483:
		return "Too Many Hops"
	case 486:
		return "Busy Here"
	case 487:
		return "Request Terminated"
	case 430:
		return "Flow Failed"
	case 488:
		return "Not Acceptable Here"
	case 491:
		return "Request Pending"
	case 500:
		return "Server Internal Error"
	case 503:
		return "Service Unavailable"
	case 600:
		return "Busy Everywhere"
	case 603:
		return "Decline"
	}
	return "Status " + strconv.Itoa(code)
}

// mergeKey identifies an INVITE across the branches a forking proxy may
// send it on (RFC 3261 §8.2.2.2).
func mergeKey(req *sip.Request) string {
	f, cid, cs := req.From(), req.CallID(), req.CSeq()
	if f == nil || cid == nil || cs == nil {
		return ""
	}
	tag, _ := f.Params.Get("tag")
	return cid.Value() + "|" + tag + "|" + strconv.FormatUint(uint64(cs.SeqNo), 10)
}

func branchOf(req *sip.Request) string {
	if v := req.Via(); v != nil {
		b, _ := v.Params.Get("branch")
		return b
	}
	return ""
}

// Looped reports whether an initial INVITE is a loop: it carries the loop
// marker of one of our live calls (our own INVITE came back), or it is a
// merged request (RFC 3261 §8.2.2.2: Call-ID, From tag and CSeq of an
// INVITE being set up, on another branch). Both get 482.
func (b *B2BUA) Looped(req *sip.Request) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range headersNamed(req, loopHeader) {
		if b.loops[strings.TrimSpace(h.Value())] != nil {
			return true
		}
	}
	if k := mergeKey(req); k != "" {
		if c := b.merged[k]; c != nil && c.branch != branchOf(req) {
			return true
		}
	}
	return false
}

// OnInvite handles an INVITE: an initial one is routed with the Router
// and blocks until the A leg has its final response (and, for a 2xx, its
// ACK); an in-dialog one (re-INVITE) is relayed to the other party.
func (b *B2BUA) OnInvite(req *sip.Request, tx sip.ServerTransaction) {
	b.Invite(req, tx, b.current())
}

// Invite is OnInvite for a caller whose request was admitted under pol
// (the gateway's view of one push): an initial INVITE is routed by
// pol.Router and set up with pol.Settings.
func (b *B2BUA) Invite(req *sip.Request, tx sip.ServerTransaction, pol Policy) {
	b.handleInvite(req, tx, pol, pol.Router.Outbound, true, End{})
}

// InboundInvite handles an initial INVITE that the gateway has already
// routed under pol (d): a call from a trunk, from, such as a PSTN gateway's
// to a DID resolved to an extension by the inbound rules. Otherwise it
// behaves as Invite.
func (b *B2BUA) InboundInvite(req *sip.Request, tx sip.ServerTransaction, pol Policy, d dialplan.Decision, from End) {
	b.handleInvite(req, tx, pol, func(string) (dialplan.Decision, bool) { return d, true }, false, from)
}

// handleInvite runs an INVITE; trusted says the caller is a local user
// (authenticated by the gateway), whose transfers may go anywhere the
// dial plan goes, and from is the trunk of a caller that is not one.
func (b *B2BUA) handleInvite(req *sip.Request, tx sip.ServerTransaction, pol Policy, route func(number string) (dialplan.Decision, bool), trusted bool, from End) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	if to := req.To(); to != nil && to.Params.Has("tag") {
		b.onReinvite(req, tx)
		return
	}
	set := pol.Settings
	if b.Looped(req) {
		respondWarn(set, tx, req, 482, "Loop Detected")
		return
	}
	if b.refuseWhileDraining(req, tx) {
		return
	}
	if max := set.maxCalls(); max > 0 {
		b.mu.Lock()
		n := len(b.calls)
		b.mu.Unlock()
		if n >= max {
			respondWarn(set, tx, req, 503, "Service Unavailable", sip.NewHeader("Retry-After", "5"))
			return
		}
	}
	// No 100 Trying here: the transaction sends it when nothing else went
	// out within 200 ms (doc.go).

	arrived, laddr, contact, err := b.localFor(set, tx)
	if err != nil {
		b.log.Warn("b2bua: no local address for call", "err", err)
		respondWarn(set, tx, req, 500, "Server Internal Error")
		return
	}
	if set.contact == nil && laddr == nil {
		// Our Contact is the TCP or TLS listener the call arrived on.
		contact = streamContact(contact, req.Transport(), req.Recipient.Scheme)
	}
	dua := &sipgo.DialogUA{
		Client:         b.client,
		ContactHDR:     sip.ContactHeader{Address: contact},
		RewriteContact: true,
	}
	a, err := dua.ReadInvite(req, tx)
	if err != nil {
		respondWarn(set, tx, req, 400, "Bad Request")
		return
	}
	if mf := req.MaxForwards(); mf != nil && mf.Val() == 0 {
		_ = a.Respond(483, "Too Many Hops", nil, set.warnings()...)
		return
	}
	if n, _, ok := sessionExpires(req); ok && n < minSE {
		// RFC 4028 §9: below the box's Min-SE.
		_ = a.Respond(422, "Session Interval Too Small", nil, append(set.warnings(), sip.NewHeader("Min-SE", strconv.Itoa(minSE)))...)
		return
	}
	if headerNamed(req, "Replaces") != nil {
		b.onReplaces(req, a, arrived, contact, trusted)
		return
	}
	number := req.Recipient.User
	var behalf *Boss
	caller := ""
	if f := req.From(); f != nil {
		caller = f.Address.User
	}
	if rest, boss, isCode := set.onBehalf(caller, number); isCode && trusted {
		switch {
		case boss == nil:
			_ = a.Respond(403, "Forbidden", nil, set.warnings()...) // nobody's delegate
			return
		case rest == "":
			_ = a.Respond(484, "Address Incomplete", nil, set.warnings()...)
			return
		}
		number, behalf = rest, boss
	}
	if orbit, isPark := set.parkTarget(number); isPark && trusted {
		b.retrieve(set, a, req, callLocal{arrived: arrived, laddr: laddr, contact: contact}, caller, orbit)
		return
	}
	if users, isPickup := set.pickupTarget(caller, number); isPickup && trusted && set.cfg.Services != nil {
		b.servePickup(set, a, req, callLocal{arrived: arrived, laddr: laddr, contact: contact}, caller, users)
		return
	}
	d, ok := route(number)

	c := newCall(b, pol)
	c.setup.a, c.setup.aTx, c.setup.aReq, c.d, c.key = a, tx, a.InviteRequest, d, a.ID
	c.local = callLocal{arrived: arrived, laddr: laddr, contact: contact}
	c.trusted, c.initial, c.branch = trusted, true, branchOf(req)
	if hasOption(req, "100rel", "Require") {
		c.rel = newUASReliable() // RFC 3262 §3: the caller requires reliable provisionals
	}
	now := time.Now()
	c.info = CallInfo{To: number, Target: d.Target, Route: d.Route, State: StateRouting, Started: now}
	if h := req.CallID(); h != nil {
		c.info.ID = h.Value()
	}
	if f := req.From(); f != nil {
		c.info.From = f.Address.User
	}
	c.cdr = CDR{CallID: c.info.ID, Start: now, Caller: c.info.From, Dialled: number, Target: d.Target, Route: d.Route, Rule: d.Rule}
	if behalf != nil {
		c.behalf, c.cdr.OnBehalfOf = behalf, behalf.Extension
	}

	if (number == codeOwnMailbox || number == codeAnyMailbox) && trusted && set.cfg.Voicemail != nil && set.cfg.Media != nil {
		c.serveMailbox(number)
		return
	}
	if fc, arg, isCode := parseFeatureCode(number); isCode && trusted && set.cfg.Services != nil {
		c.serveFeature(fc, arg)
		return
	}
	if ok && d.Route == dialplan.RouteLocal {
		// Forward-always is followed before the media is anchored, so the
		// anchor faces where the call goes.
		if !c.followAlways() {
			return
		}
		d = c.d
	}
	body, ct := req.Body(), contentTypeOf(req)
	switch {
	case !ok || d.Route == "":
		c.respondA(404, "Not Found")
		c.end(Failed, BySystem)
		return
	case d.Route == dialplan.RouteHQ && set.cfg.HQ == nil || d.Route == dialplan.RoutePSTN && len(set.gateways) == 0:
		c.respondA(503, "Service Unavailable") // no trunk for this route
		c.end(Failed, BySystem)
		return
	case len(body) > 0 && !isSDP(ct):
		c.recordStatus(488)
		_ = a.Respond(488, "Not Acceptable Here", nil, append(set.warnings(), acceptSDP)...)
		c.end(Failed, BySystem)
		return
	}
	if set.cfg.Media != nil {
		// The media faces the B side where the first target is (forks to
		// contacts on several interfaces share the first one's).
		bSide := addrOf(laddr, contact)
		if set.cfg.LocalFor != nil || d.Route == dialplan.RouteLocal {
			if ts, err := b.targets(c.ring, set, d); err == nil && len(ts) > 0 {
				c.setup.early = ts // run rings these: no second lookup
				if ts[0].laddr != nil {
					bSide = addrOf(ts[0].laddr, contact)
				}
			}
		}
		br := Bridge{CallID: c.info.ID, A: addrOf(arrived, contact), B: bSide, EndA: from, EndB: set.endOf(d)}
		if trusted {
			br.EndA = End{Route: dialplan.RouteLocal, Name: c.info.From}
		}
		an, err := set.cfg.Media(br, c.onMediaDead)
		if err == nil {
			c.anchor = an
			if rs, ok := an.(interface{ SetRoute(route string) }); ok {
				rs.SetRoute(string(d.Route)) // per-route media policy (the appliance's media.srtp_routes)
			}
			if len(body) > 0 && an != nil {
				body, err = an.Offer(LegA, body)
			}
		}
		if err != nil {
			b.log.Info("b2bua: media cannot be bridged", "call", c.info.ID, "err", err)
			c.respondA(488, "Not Acceptable Here")
			c.end(Failed, BySystem)
			return
		}
	}
	c.setup.offer = body
	mk := mergeKey(req)
	b.mu.Lock()
	b.calls[c.key] = c
	b.loops[c.token] = c
	if mk != "" {
		b.merged[mk] = c
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if b.merged[mk] == c {
			delete(b.merged, mk)
		}
		b.mu.Unlock()
	}()
	c.run()
}

// LocalAddr is the address of the listener the request of server
// transaction tx arrived on: sipgo's (its connection's) or the gateway's
// fast path's (LocalAddr); nil when unknown.
func LocalAddr(tx sip.ServerTransaction) net.Addr {
	switch t := tx.(type) {
	case interface{ LocalAddr() net.Addr }:
		return t.LocalAddr()
	case *sip.ServerTx:
		if c := t.Connection(); c != nil {
			return c.LocalAddr()
		}
	}
	return nil
}

// localFor returns the listener the A leg arrived on, the listener B legs
// leave from and our Contact URI.
func (b *B2BUA) localFor(set *Settings, tx sip.ServerTransaction) (arrived, laddr *sip.Addr, contact sip.Uri, err error) {
	udp := false
	if la := LocalAddr(tx); la != nil {
		switch a := la.(type) {
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

// OnAck handles an ACK outside any transaction: the caller's ACK for our
// 2xx (forwarded as the ACK of the answering B leg), or the ACK for the
// 2xx to a party's re-INVITE (absorbed).
func (b *B2BUA) OnAck(req *sip.Request, tx sip.ServerTransaction) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	p := b.partyOf(req)
	if p == nil {
		return
	}
	if c, _ := p.bridge(); c != nil {
		c.onAck(p, req, tx)
	}
}

// OnBye handles a BYE from either party: 200 to the sender, BYE to the
// other party, and the call ends. A BYE from the caller on the early
// dialog (RFC 3261 §15) stops the ringing; its INVITE gets 487.
func (b *B2BUA) OnBye(req *sip.Request, tx sip.ServerTransaction) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	p := b.partyOf(req)
	if p == nil {
		if id, err := sip.DialogIDFromRequestUAS(req); err == nil {
			b.mu.Lock()
			c := b.calls[id]
			b.mu.Unlock()
			if c != nil && c.initial {
				c.abort(errCallerBye)
				respond(tx, req, 200, "OK")
				return
			}
		}
		respond(tx, req, 481, "Call/Transaction Does Not Exist")
		return
	}
	c, l := p.bridge()
	p.leave()
	if c != nil && c.transferor() != p {
		b.removeCall(c) // gone from Calls before the sender hears 200
	}
	respond(tx, req, 200, "OK")
	if c != nil {
		c.hangup(p, l)
	} else if p.onBye != nil {
		p.onBye()
	}
}

// OnUpdate handles an UPDATE (RFC 3311) in an answered call: an offer is
// relayed to the other party; one without a body is answered here.
func (b *B2BUA) OnUpdate(req *sip.Request, tx sip.ServerTransaction) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	b.onUpdate(req, tx)
}

// OnOptions answers an in-dialog OPTIONS: 200 for a dialog of ours, 481
// for one we do not know (a peer's keep-alive learns the call is gone).
func (b *B2BUA) OnOptions(req *sip.Request, tx sip.ServerTransaction) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	if b.partyOf(req) == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist")
		return
	}
	res := sip.NewResponseFromRequest(req, 200, "OK", nil)
	res.AppendHeader(sip.NewHeader("Allow", allowInDialog))
	res.AppendHeader(acceptSDP)
	_ = tx.Respond(res)
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
