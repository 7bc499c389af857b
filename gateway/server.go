package gateway

import (
	"context"
	"crypto/tls"
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

	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/fastpath"
	"github.com/outpost/outpost/gateway/hqtrunk"
	"github.com/outpost/outpost/gateway/listen"
	"github.com/outpost/outpost/gateway/overload"
	"github.com/outpost/outpost/gateway/pool"
	"github.com/outpost/outpost/gateway/registrar"
	"github.com/outpost/outpost/gateway/sanity"
	"github.com/outpost/outpost/gateway/siplog"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/siptarget"
)

// Listen is one SIP listening socket (see gateway/listen).
type Listen = listen.Spec

// Config is the gateway's part of the document. Zero fields mean defaults.
type Config struct {
	Listen []Listen
	// UDPReadBuffer is the receive buffer of each UDP socket; 0 =
	// listen.DefaultUDPReadBuffer (4 MiB), so a burst of re-registrations
	// queues in the kernel instead of being dropped.
	UDPReadBuffer int
	// ChallengeRate bounds the stateless refusals of INVITEs sent to one
	// source IP per second (burst twice that); 0 = fastpath.RefusalRate,
	// negative = no limit.
	ChallengeRate int
	// ServerName goes into the Server and User-Agent headers.
	ServerName string
	Registrar  registrar.Config
	Dialplan   dialplan.Config
	// Mode is the operating mode a new Server routes calls in; afterwards
	// the appliance's mode logic sets it with SetMode (Reconfigure keeps it).
	Mode mode.Mode
	// PSTN gateways in order of preference.
	PSTN []PSTNGateway
	// PSTNProbeInterval is the OPTIONS period per PSTN gateway
	// (pstn.options_interval_ms); 0 = no probes: only call outcomes feed
	// the gateways' health (pstn.go).
	PSTNProbeInterval time.Duration
	// Warning is the survivable-mode Warning on answers to REGISTER and
	// INVITE (warning.go).
	Warning SurvivableWarning
	// HQ describes the HQ targets for explanations (outpostctl route):
	// static targets, or "domain hq.example.com (RFC 3263)".
	HQ []string
	// Calls tunes the B2BUA (ring and attempt timeouts).
	Calls b2bua.Config
	// HQTrunk, when set, is where route "hq" goes.
	HQTrunk *HQConfig
	// Upstream, with an HQTrunk, registers local users at HQ too.
	Upstream *UpstreamConfig
	// Voicemail is where calls to users with voicemail go when they are
	// not taken (no answer, busy, unreachable).
	Voicemail Voicemail
	// Capture sends a copy of every SIP message to a HEP server (capture.go).
	Capture Capture
	// Pool, when set, makes the box one member of a registrar pool
	// (pool.go); nil = one box.
	Pool *pool.Config
	// TLS is the box's certificate on tls listeners (tls.go); required
	// when Listen has one.
	TLS TLSCert
}

// PSTNGateway is one local PSTN gateway.
type PSTNGateway struct {
	Name   string
	Target siptarget.Target // udp or tcp: tls is refused (the TLS client configuration is HQ's: hqtrunk.ClientTLS)
}

// Allowed methods, announced in OPTIONS and 405 answers.
const allow = "INVITE, ACK, CANCEL, BYE, OPTIONS, REGISTER, UPDATE, REFER, MESSAGE, SUBSCRIBE"

// Server is the running SIP side.
type Server struct {
	log *slog.Logger
	ua  *sipgo.UserAgent
	srv *sipgo.Server
	reg *registrar.Registrar
	fp  *fastpath.Path
	// sipgoLog is the handler sipgo logs through: per-packet failures
	// counted by kind, one line per kind and source class per 10 s.
	sipgoLog *siplog.Limiter
	// admitted are the UDP INVITEs admitted on the fast path (invite.go).
	admitted *admittedCalls
	// lateInvites counts INVITE retransmissions absorbed after their
	// transaction ended (retainFinished).
	lateInvites atomic.Uint64
	// overload sheds new calls while they queue (gateway/overload).
	overload *overload.Gate
	// now is what runs: one push's configuration and what was built from
	// it (running.go), stored once per commit and read without a lock.
	now atomic.Pointer[running]
	// mode is the mode new calls are routed in (SetMode); choose picks
	// among listeners facing a destination (SetLocalChooser). Both
	// change without a push.
	mode   atomic.Pointer[mode.Mode]
	choose atomic.Pointer[LocalChooser]
	b2b    *b2bua.B2BUA
	// probe runs the HQ trunk's probes (and starts the PSTN and pool ones).
	probe *hqtrunk.Prober
	up    upstreamPart // upstream registration at HQ (upstream.go)
	// capture is the trace tap of the listeners and the HEP exporter (capture.go).
	capture capturePart
	pool    poolPart        // the registrar pool's probes (pool.go)
	offline *offline        // store-and-forward of instant messages (offline.go)
	hqDial  *hqtrunk.Dialer // TLS connections to HQ
	// tlsConf is the tls listeners' configuration, which reads the
	// certificate of what runs at every handshake (tls.go).
	tlsConf *tls.Config

	mu        sync.Mutex // serialises Commit, Run's start and stop, and Close
	listeners listen.Set // keyed by the configured spec
	serving   sync.WaitGroup
}

var udpMTUOnce sync.Once

// retainFinished is how long finished transactions are kept: 2 s (4*T1),
// not RFC 3261/6026's 32 s over UDP. sipgo keeps a whole transaction for
// that time (about 6 KiB for the three of a call), and at a few hundred
// calls a second finished calls would fill the heap and trip the overload
// gate's memory criterion long before the CPU is busy. The 32 s duties
// are kept cheaply where they matter:
//   - Timer L: a late retransmission of an initial UDP INVITE is absorbed
//     by the admitted-INVITE set (invite.go), never a second call;
//   - Timer M: the B2BUA keeps its ACK of a 2xx, as bytes, for 2-3 s and
//     re-sends it for a retransmitted 2xx (gateway/b2bua/acks.go);
//   - Timer J: a retransmitted BYE is answered again for 2 s, then gets
//     481, which also means the dialog is over;
//   - Timer K only absorbs duplicates of a response, within a round trip.
//
// Timers D and H keep their RFC values: the ACK ends them early. The
// fast path's transactions (gateway/fastpath) read the same variables,
// which sipgo reads when a transaction reaches the state: set once, at
// initialisation. The figures are in bench/RESULTS.md.
const retainFinished = 4 * 500 * time.Millisecond

func init() {
	sip.Timer_L = retainFinished
	sip.Timer_J = retainFinished
	sip.Timer_K = retainFinished
}

// New binds every listener of cfg, restores persisted bindings and
// prepares the SIP stack; nothing is served until Run. persist may be nil.
func New(ctx context.Context, cfg Config, persist registrar.Persister, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// sipgo refuses to send UDP messages above its MTU guess instead of
	// letting the kernel fragment; a 200 listing many contacts is legitimate.
	udpMTUOnce.Do(func() { sip.UDPMTUSize = 65000 })

	s := &Server{log: log, listeners: listen.Set{}, admitted: newAdmittedCalls(), overload: overload.New()}
	s.tlsConf = listen.ServerTLS(s.certificate)
	if _, err := cfg.TLS.parse(cfg.Listen); err != nil {
		return nil, err // before anything is bound
	}
	// Whatever a packet can make a part log, once per packet, goes
	// through a siplog.Limiter: counted, summarised once per 10 s, its
	// text truncated and escaped (a garbage flood must not flood the log).
	s.sipgoLog = siplog.New(log.Handler(), siplog.Sipgo, siplog.Options{})
	sipLog := slog.New(s.sipgoLog).With("part", "sipgo")
	fpLog := slog.New(siplog.New(log.Handler(), siplog.All("fastpath"), siplog.Options{})).With("part", "fastpath")
	regLog := slog.New(siplog.New(log.Handler(), registrarPerRequest, siplog.Options{})).With("part", "registrar")
	s.fp = fastpath.New(s.answerStateless, s.admitInvite, fpLog)
	s.fp.SetRefusalRate(cfg.refusalRate())
	ua, err := sipgo.NewUA(
		sipgo.WithUserAgent(cfg.serverName()),
		sipgo.WithUserAgenTLSConfig(hqtrunk.ClientTLS(func() *hqtrunk.Trunk { return s.now.Load().hq })),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(sipLog), sip.WithTransportLayerReadFilter(s.fp.Filter)),
		sipgo.WithUserAgentTransactionLayerOptions(
			sip.WithTransactionLayerLogger(sipLog),
			// A response no transaction takes: a retransmitted 2xx to one
			// of the B2BUA's INVITEs gets its ACK again (b2bua/acks.go);
			// any other (a late retransmission, a stray) is dropped, RFC
			// 3261 §17.1.3. sipgo's default handler would log each one to
			// the default logger, past the limiter.
			sip.WithTransactionLayerUnhandledResponseHandler(func(r *sip.Response) {
				if s.b2b.OnStrayResponse(r) { // set before any listener is served
					return
				}
				sipLog.Info("Unhandled sip response", "source", r.Source(), "response", r.StartLine())
			}),
		),
	)
	if err != nil {
		return nil, fmt.Errorf("gateway: sip user agent: %w", err)
	}
	srv, err := sipgo.NewServer(ua, sipgo.WithServerLogger(sipLog))
	if err != nil {
		ua.Close()
		return nil, fmt.Errorf("gateway: sip server: %w", err)
	}
	reg, err := registrar.New(cfg.Registrar, persist, regLog)
	if err == nil {
		err = reg.Load(ctx)
	}
	if err != nil {
		ua.Close()
		return nil, err
	}
	s.mode.Store(&cfg.Mode)
	s.ua, s.srv, s.reg = ua, srv, reg
	s.hqDial = hqtrunk.NewDialer(func(dest string) bool {
		c, _ := ua.TransportLayer().GetConnection("tls", dest)
		return c != nil
	})
	if s.capture.exp, err = s.newExporter(cfg.Capture); err != nil {
		ua.Close()
		return nil, err
	}
	bound, err := listen.BindAll(cfg.Listen, s.listenOptions(cfg), nil)
	if err != nil {
		ua.Close()
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		bound.CloseAll()
		ua.Close()
		return nil, err
	}
	ms, _ := persist.(MessageStore)
	s.offline = newOffline(ms, log.With("part", "messages"))
	run, err := s.newRunning(cfg, bound, nil)
	if err != nil {
		return fail(err)
	}
	s.now.Store(run)
	s.listeners, s.pool.cur = bound, run.pool
	reg.SetRedirect(s.redirect)
	// A phone that registers takes kept messages, and changes its user's
	// presence; one that unregisters too.
	reg.SetOnBound(func(aor string) {
		if ms != nil {
			s.offline.bound(aor)
		}
		s.b2b.UsersChanged()
		s.b2b.PhoneRegistered(aor)
	})
	reg.SetOnUnbound(func(string) { s.b2b.UsersChanged() })
	if s.b2b, err = b2bua.New(ua, run.b2buaConfig(s.mode.Load, s.offline.keepFunc()), poolLocator{locator{reg: reg, flow: s.flowOpen}, s}, router{run, cfg.Mode}, log.With("part", "b2bua")); err != nil {
		return fail(fmt.Errorf("gateway: %w", err))
	}
	s.b2b.Follow(s.policy)
	s.offline.b2b = s.b2b
	srv.OnRegister(s.onRegister)
	srv.OnOptions(s.onOptions)
	srv.OnInvite(s.onInvite)
	srv.OnAck(s.b2b.OnAck)
	srv.OnBye(s.b2b.OnBye)
	srv.OnRefer(s.b2b.OnRefer)
	srv.OnUpdate(s.b2b.OnUpdate)
	srv.OnInfo(s.onInfo)
	srv.OnPrack(s.onPrack)
	srv.OnMessage(s.onMessage)
	srv.OnSubscribe(s.onSubscribe)
	srv.OnNoRoute(s.onNoRoute)
	// UDP INVITEs (their CANCELs and non-2xx ACKs), BYEs and the ACKs of
	// 2xx responses are run by the fast path's transactions, not sipgo's.
	s.fp.Serve(fastpath.Handlers{Invite: s.onInvite, Ack: func(req *sip.Request) { s.b2b.OnAck(req, nil) }, Bye: s.b2b.OnBye})
	s.fp.SetSockets(bound.UDP())
	s.probe = hqtrunk.NewProber(ua, func(hostport string) *sip.Addr { return s.now.Load().local.from(hostport) })
	s.up = upstreamPart{ua: ua, log: log.With("part", "upstream")}
	reg.OnPresence(s.up.presence)
	ucfg, err := checkedUpstream(run, bound)
	if err != nil {
		return fail(err)
	}
	s.up.apply(ucfg, reg.Present(), cfg.Mode)
	return s, nil
}

func (c Config) serverName() string {
	if c.ServerName == "" {
		return "outpost"
	}
	return c.ServerName
}

// listenOptions are the sockets' options. A TCP connection may stay
// silent for the longest registration interval plus a margin, since a
// phone registered over TCP refreshes within it.
func (c Config) listenOptions() listen.Options {
	maxExp := c.Registrar.MaxExpires
	if maxExp == 0 {
		maxExp = 3600
	}
	return listen.Options{UDPReadBuffer: c.UDPReadBuffer, TCPIdle: time.Duration(maxExp)*time.Second + 5*time.Minute}
}

// serve starts serving one listener; the Server's wait group owns it. A
// UDP socket is served once sipgo has it in its pool (listen.AwaitServed).
func (s *Server) serve(l *listen.Socket) {
	s.serving.Go(func() {
		var err error
		switch {
		case l.PacketConn != nil:
			err = s.srv.ServeUDP(l.PacketConn)
		case l.TLS:
			// Same as ServeTCP but the messages' transport is TLS:
			// responses, and requests to the peer's address (a phone
			// registered here), go back on the connection (sipgo's
			// pool is keyed by the peer's address).
			err = s.srv.ServeTLS(l.Listener)
		default:
			err = s.srv.ServeTCP(l.Listener)
		}
		if err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Error("sip listener stopped", "listener", l.Bound, "err", err)
		}
	})
	if l.PacketConn != nil && !listen.AwaitServed(s.ua.TransportLayer(), l.PacketConn, time.Second) {
		s.log.Warn("sipgo has not registered a listener within 1 s", "listener", l.PacketConn.LocalAddr().String())
	}
}

// Run serves every listener and runs the registrar until ctx ends, then
// closes the listeners and waits for them.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	s.capture.run() // before the listeners: the first message is exported too
	l := s.hqDial.Listener()
	s.serving.Go(func() { _ = s.srv.ServeTLS(l) })
	for _, l := range s.listeners {
		s.serve(l)
		s.log.Info("sip listening", "listener", l.Bound)
	}
	run := s.now.Load()
	s.probe.Run(ctx, run.hq, s.log)
	run.pstn.start(ctx, nil, s.probe.Pinger(nil), s.log.With("part", "pstn-probe"))
	s.up.run(ctx)
	s.pool.start(ctx, s)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.pool.stop()
		s.capture.stop()
		s.up.close()
		run := s.now.Load()
		run.pstn.close()
		s.probe.Stop(run.hq)
		s.mu.Unlock()
	}()

	regErr := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	go func() { regErr <- s.reg.Run(rctx) }()
	offDone := make(chan struct{})
	go func() {
		defer close(offDone)
		s.offline.run(rctx)
	}()

	var err error
	select {
	case <-ctx.Done():
	case err = <-regErr:
		regErr = nil
	}
	cancel()
	<-offDone
	s.mu.Lock()
	s.listeners.CloseAll()
	s.mu.Unlock()
	s.hqDial.Stop()
	s.serving.Wait()
	s.ua.Close()
	s.fp.Wait() // the INVITEs' handlers: their B legs' transactions ended with the UA
	if regErr != nil {
		err = <-regErr
	}
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// Listeners returns the bound addresses, e.g. "udp:127.0.0.1:5060", sorted.
func (s *Server) Listeners() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.listeners))
	for _, l := range s.listeners {
		out = append(out, l.Bound)
	}
	slices.Sort(out)
	return out
}

// Dropped counts SIP packets dropped unanswered or failing in sipgo, of
// every kind (DroppedByKind).
func (s *Server) Dropped() uint64 {
	var n uint64
	for _, v := range s.DroppedByKind() {
		n += v
	}
	return n
}

// DroppedByKind counts per-packet failures by kind: the fast path's drops
// (not_sip, unparseable, rate_limited, stateless_ack) and the failures
// sipgo logs (unparseable, bad_request, unmatched_response, …).
func (s *Server) DroppedByKind() map[string]uint64 {
	out := s.fp.Drops()
	for k, v := range s.sipgoLog.Counts() {
		out[k] += v
	}
	if n := s.lateInvites.Load(); n > 0 {
		out["late_retransmission"] = n
	}
	return out
}

// registrarPerRequest classifies the registrar's records that a request
// from anyone can cause, once per request: a failed authentication (and
// the start of a source's block, once per episode, but a flood of forged
// sources has many episodes).
func registrarPerRequest(r slog.Record) (string, bool) {
	switch {
	case r.Message == "authentication failed":
		return "auth_failed", true
	case strings.HasPrefix(r.Message, "authentication failures over limit"):
		return "auth_blocked", true
	}
	return "", false
}

// refused answers req with sanity.Check's refusal, if any, and says so.
func (s *Server) refused(run *running, req *sip.Request, tx sip.ServerTransaction) bool {
	res := sanity.Check(req)
	if res != nil {
		s.respond(run, tx, res)
	}
	return res != nil
}

// Registrar returns the local registrar.
func (s *Server) Registrar() *registrar.Registrar { return s.reg }

// respond sends res, answered under run: its Warning and Server header.
func (s *Server) respond(run *running, tx sip.ServerTransaction, res *sip.Response) {
	run.warn(res, s.Mode())
	res.AppendHeader(sip.NewHeader("Server", run.cfg.serverName()))
	if err := tx.Respond(res); err != nil {
		s.log.Debug("sending response failed", "status", res.StatusCode, "err", err)
	}
}

func (s *Server) onRegister(req *sip.Request, tx sip.ServerTransaction) {
	run := s.now.Load()
	if s.refused(run, req, tx) {
		return
	}
	s.respond(run, tx, s.reg.HandleRegister(req, localName(req, tx)))
}

// answerStateless answers the UDP REGISTER and OPTIONS the fast path
// (gateway/fastpath) takes off sipgo's transaction layer.
func (s *Server) answerStateless(req *sip.Request, local string) *sip.Response {
	run := s.now.Load()
	if res := sanity.Check(req); res != nil {
		res.AppendHeader(sip.NewHeader("Server", run.cfg.serverName()))
		return res
	}
	var res *sip.Response
	if req.Method == sip.REGISTER {
		res = s.reg.HandleRegister(req, local)
		run.warn(res, s.Mode())
	} else {
		res = s.optionsAnswer(req)
	}
	res.AppendHeader(sip.NewHeader("Server", run.cfg.serverName()))
	return res
}

// onPrack passes a PRACK (RFC 3262) to the B2BUA: 200 when it
// acknowledges a reliable provisional response of a ringing call, else 481.
func (s *Server) onPrack(req *sip.Request, tx sip.ServerTransaction) {
	run := s.now.Load()
	if s.refused(run, req, tx) {
		return
	}
	s.b2b.OnPrack(req, tx)
}

// onMessage admits an instant message (b2bua.Message): from a local user
// who authenticates as its From user, like a call.
func (s *Server) onMessage(req *sip.Request, tx sip.ServerTransaction) {
	run := s.now.Load()
	if s.refused(run, req, tx) {
		return
	}
	if _, res := s.reg.AuthorizeCall(req); res != nil {
		s.respond(run, tx, res)
		return
	}
	s.b2b.Message(req, tx, run.policy(s.Mode()))
}

// onSubscribe serves subscriptions to local users' state (b2bua
// subscribe.go): a new one from an authenticated local user, a refresh
// in its dialog.
func (s *Server) onSubscribe(req *sip.Request, tx sip.ServerTransaction) {
	run := s.now.Load()
	if s.refused(run, req, tx) {
		return
	}
	if to := req.To(); to == nil || !to.Params.Has("tag") {
		if _, res := s.reg.AuthorizeCall(req); res != nil {
			s.respond(run, tx, res)
			return
		}
	}
	s.b2b.OnSubscribe(req, tx, run.policy(s.Mode()))
}

func (s *Server) onOptions(req *sip.Request, tx sip.ServerTransaction) {
	run := s.now.Load()
	if s.refused(run, req, tx) {
		return
	}
	if to := req.To(); to != nil && to.Params.Has("tag") {
		s.b2b.OnOptions(req, tx) // in-dialog: 481 once the call is gone
		return
	}
	s.respond(run, tx, s.optionsAnswer(req))
}

// optionsAnswer answers keep-alive and capability queries (RFC 3261 §11):
// 200, or while the box drains 503, so that the probes of the other pool
// members (and of phones that watch their registrar) take it out of
// service and its users' home moves to their next member.
func (s *Server) optionsAnswer(req *sip.Request) *sip.Response {
	if on, until := s.Draining(); on {
		res := sip.NewResponseFromRequest(req, sip.StatusServiceUnavailable, "Draining", nil)
		res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(max(int(time.Until(until).Seconds()), 1))))
		return res
	}
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
	res.AppendHeader(sip.NewHeader("Allow", allow))
	res.AppendHeader(sip.NewHeader("Allow-Events", "dialog, presence"))
	res.AppendHeader(sip.NewHeader("Accept", "application/sdp"))
	res.AppendHeader(sip.NewHeader("Accept-Encoding", "identity"))
	res.AppendHeader(sip.NewHeader("Accept-Language", "en"))
	return res
}

func (s *Server) onNoRoute(req *sip.Request, tx sip.ServerTransaction) {
	run := s.now.Load()
	if req.IsAck() {
		return // ACK to a non-2xx final response is absorbed by the transaction
	}
	if s.refused(run, req, tx) {
		return
	}
	switch req.Method {
	case sip.CANCEL:
		// A CANCEL that sipgo matched to no INVITE transaction (RFC 3261
		// §9.2).
		s.respond(run, tx, sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist", nil))
		return
	}
	s.methodNotAllowed(run, req, tx)
}

func (s *Server) methodNotAllowed(run *running, req *sip.Request, tx sip.ServerTransaction) {
	res := sip.NewResponseFromRequest(req, sip.StatusMethodNotAllowed, "Method Not Allowed", nil)
	res.AppendHeader(sip.NewHeader("Allow", allow))
	s.respond(run, tx, res)
}

// MailboxChanged tells the phones of a mailbox's user that its messages
// changed (message waiting).
func (s *Server) MailboxChanged(mailbox string) { s.b2b.MailboxChanged(mailbox) }

// onInfo takes the DTMF INFOs of calls the box's voicemail answers; any
// other INFO gets 405, as before the voicemail.
func (s *Server) onInfo(req *sip.Request, tx sip.ServerTransaction) {
	run := s.now.Load()
	if s.refused(run, req, tx) || s.b2b.OnInfo(req, tx) {
		return
	}
	s.methodNotAllowed(run, req, tx)
}

// localName names the listener a request arrived on, e.g. "udp:127.0.0.1:5060".
func localName(req *sip.Request, tx sip.ServerTransaction) string {
	if a := b2bua.LocalAddr(tx); a != nil {
		return strings.ToLower(req.Transport()) + ":" + a.String()
	}
	return strings.ToLower(req.Transport())
}

// Close releases a Server that never ran (Run closes what it served):
// its listeners and the SIP stack.
func (s *Server) Close() {
	s.b2b.EndSubscriptions()
	s.mu.Lock()
	s.listeners.CloseAll()
	s.mu.Unlock()
	s.ua.Close()
}

// SetMode makes m the mode new calls are routed in; calls in progress keep
// the route they took. Upstream registration pauses in survivable mode and
// resumes, paced, on failback. Config.Mode is the mode of a new Server
// only: afterwards the appliance's mode logic sets it.
func (s *Server) SetMode(m mode.Mode) {
	if old := s.mode.Swap(&m); old == nil || *old != m {
		// Cached REGISTER answers carry the old mode's Warning (or none).
		s.fp.ForgetAnswers()
	}
	s.up.mode(m)
}

// refusalRate is ChallengeRate as the fast path's rate and burst.
func (c Config) refusalRate() (rate, burst float64) {
	switch {
	case c.ChallengeRate == 0:
		return fastpath.RefusalRate, fastpath.RefusalBurst
	case c.ChallengeRate < 0:
		return 0, 0
	}
	return float64(c.ChallengeRate), 2 * float64(c.ChallengeRate)
}
