package b2bua

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/mode"
)

// wait bounds every blocking step of a test.
const wait = 5 * time.Second

var (
	sdpA = []byte("v=0\r\no=a 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\n")
	sdpB = []byte("v=0\r\no=b 2 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 41000 RTP/AVP 0\r\n")
)

func testLogger() *slog.Logger {
	if os.Getenv("B2BUA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func TestMain(m *testing.M) {
	// sipgo logs through its default logger; keep it quiet unless asked.
	level := slog.LevelWarn
	if os.Getenv("B2BUA_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	sip.SetDefaultLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	// As the gateway sets it: UDP above sipgo's MTU guess is sent (and
	// fragmented) rather than refused.
	sip.UDPMTUSize = 65000
	os.Exit(m.Run())
}

type planRouter struct {
	p *dialplan.Plan
	// vm maps extensions with voicemail to the pilot number.
	vm map[string]string
}

func (r planRouter) Outbound(n string) (dialplan.Decision, bool) {
	return r.p.Outbound(n, mode.Normal)
}

func (r planRouter) Voicemail(ext string) (dialplan.Decision, bool) {
	pilot, ok := r.vm[ext]
	if !ok {
		return dialplan.Decision{}, false
	}
	return r.p.Outbound(pilot, mode.Normal)
}

type fakeLocator struct {
	mu   sync.Mutex
	m    map[string][]Contact
	pool []Contact // other registrar pool members (PoolContacts)
}

func (l *fakeLocator) PoolContacts(string) []Contact {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Contact(nil), l.pool...)
}

func (l *fakeLocator) set(ext string, cs ...Contact) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[ext] = cs
}

func (l *fakeLocator) Contacts(ext string) []Contact {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Contact(nil), l.m[ext]...)
}

// env is one box plus the phones of a test.
type env struct {
	t   *testing.T
	b   *B2BUA
	loc *fakeLocator
	box string // host:port of the box's listener

	ua      *sipgo.UserAgent
	srv     *sipgo.Server
	closing *atomic.Bool
}

// listen adds a UDP listener to the box and returns its host:port.
func (e *env) listen() string {
	e.t.Helper()
	conn := listenUDP(e.t)
	serve(e.t, e.ua, e.srv, conn, e.closing, nil)
	return conn.LocalAddr().String()
}

func listenUDP(t *testing.T) net.PacketConn {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// newUA makes a test UA whose sockets stop delivering messages once
// closing is set (see serve).
func newUA(closing *atomic.Bool, opts ...sipgo.UserAgentOption) (*sipgo.UserAgent, error) {
	quiet := func(_ sip.TransportReadProps, b []byte) ([]byte, error) {
		if closing.Load() {
			return nil, nil
		}
		return b, nil
	}
	return sipgo.NewUA(append(opts, sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerReadFilter(quiet)))...)
}

// serve runs srv on conn until cleanup, which closes ua and waits.
// closing (the UA's read filter, newUA) is set first: a message that
// arrives while the UA closes (a late ACK from the other side) would
// otherwise find no listener in sipgo's pool and get a fresh socket, with
// a reader goroutine nobody stops, for its answer.
//
// busy, when set, counts the UA's handlers still running: cleanup waits
// (bounded) for it to reach 0 first, so that an exchange still under way
// (the ACK of a 487 after a CANCEL) ends inside its transaction.
func serve(t *testing.T, ua *sipgo.UserAgent, srv *sipgo.Server, conn net.PacketConn, closing *atomic.Bool, busy *atomic.Int64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeUDP(conn)
	}()
	t.Cleanup(func() {
		for deadline := time.Now().Add(wait); busy != nil && busy.Load() != 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // polling a counter the handlers keep; bounded
		}
		closing.Store(true)
		_ = conn.Close()
		_ = ua.Close()
		select {
		case <-done:
		case <-time.After(wait):
			t.Error("server did not stop")
		}
	})
	// ServeUDP registers the socket in sipgo's connection pool from its own
	// goroutine; a request pinned to it (Laddr) before that fails with
	// "address already in use". Wait (bounded) for the registration.
	deadline := time.Now().Add(wait)
	for {
		if c, err := ua.TransportLayer().GetConnection("udp", conn.LocalAddr().String()); err == nil && c != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("listener never registered")
		}
		time.Sleep(time.Millisecond)
	}
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	return newEnvVM(t, cfg, nil)
}

// newEnvVM is newEnv with voicemail: vm maps extensions to the pilot.
func newEnvVM(t *testing.T, cfg Config, vm map[string]string) *env {
	t.Helper()
	plan, err := dialplan.Compile(dialplan.Config{Rules: []dialplan.Rule{
		{Name: "local", Match: `^1\d{3}$`, Route: dialplan.RouteLocal},
		{Name: "pstn", Match: `^9\d+$`, Route: dialplan.RoutePSTN, Strip: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return newEnvRouter(t, cfg, planRouter{p: plan, vm: vm})
}

// newEnvRouter is newEnv with the given Router.
func newEnvRouter(t *testing.T, cfg Config, router Router) *env {
	t.Helper()
	base := ours()
	t.Cleanup(func() { checkGoroutines(t, base) })
	closing := new(atomic.Bool)
	// A 2xx no transaction takes goes to the B2BUA, as in the gateway.
	var box atomic.Pointer[B2BUA]
	stray := sip.WithTransactionLayerUnhandledResponseHandler(func(r *sip.Response) {
		if b := box.Load(); b != nil {
			b.OnStrayResponse(r)
		}
	})
	ua, err := newUA(closing, sipgo.WithUserAgent("outpost"), sipgo.WithUserAgentHostname("127.0.0.1"),
		sipgo.WithUserAgentTransactionLayerOptions(stray))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sipgo.NewServer(ua)
	if err != nil {
		t.Fatal(err)
	}
	conn := listenUDP(t)
	loc := &fakeLocator{m: map[string][]Contact{}}
	b, err := New(ua, cfg, loc, router, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	box.Store(b)
	srv.OnInvite(b.OnInvite)
	srv.OnAck(b.OnAck)
	srv.OnBye(b.OnBye)
	srv.OnRefer(b.OnRefer)
	srv.OnUpdate(b.OnUpdate)
	srv.OnInfo(func(req *sip.Request, tx sip.ServerTransaction) {
		if !b.OnInfo(req, tx) {
			respond(tx, req, 405, "Method Not Allowed")
		}
	})
	srv.OnOptions(b.OnOptions)
	srv.OnPrack(b.OnPrack)
	srv.OnMessage(func(req *sip.Request, tx sip.ServerTransaction) { b.Message(req, tx, b.current()) })
	srv.OnSubscribe(func(req *sip.Request, tx sip.ServerTransaction) { b.OnSubscribe(req, tx, b.current()) })
	serve(t, ua, srv, conn, closing, nil)
	e := &env{t: t, b: b, loc: loc, box: conn.LocalAddr().String(), ua: ua, srv: srv, closing: closing}
	t.Logf("box at %s", e.box)
	t.Cleanup(func() { e.noCalls() })
	return e
}

// noCalls waits (bounded) until the B2BUA has forgotten every call and
// none of its handlers runs. Tests call it before their phones close:
// sipgo handling a message while (or after) its UA closes opens a fresh
// ephemeral socket whose reader goroutine is never stopped.
func (e *env) noCalls() {
	e.t.Helper()
	deadline := time.Now().Add(wait)
	for len(e.b.Calls()) != 0 || e.b.inflight.Load() != 0 {
		if time.Now().After(deadline) {
			e.t.Errorf("calls left: %+v, handlers running: %d", e.b.Calls(), e.b.inflight.Load())
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for ours() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Errorf("goroutine leak: %d > %d goroutines in the B2BUA's code\n%s", ours(), base, buf[:n])
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ours counts the goroutines running the package's own (non-test) code.
// sipgo's transaction timers start goroutines of their own when they fire
// (Timer I, K, ...), possibly for a transaction of an earlier test; those
// are sipgo's to end and would make a plain NumGoroutine count flaky.
func ours() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			if strings.Contains(line, "/gateway/b2bua/") && strings.Contains(line, ".go:") && !strings.Contains(line, "_test.go:") {
				n++
				break
			}
		}
	}
	return n
}

// script is what a phone does with an incoming INVITE.
type script func(p *phone, d *sipgo.DialogServerSession, req *sip.Request)

type phone struct {
	t    *testing.T
	user string
	addr string
	host string
	port int
	cli  *sipgo.Client
	dsc  *sipgo.DialogServerCache
	dcc  *sipgo.DialogClientCache

	mu     sync.Mutex
	script script
	// onReinvite answers an in-dialog INVITE or UPDATE (nil = answerMirror).
	onReinvite func(p *phone, req *sip.Request) (int, []byte)
	// resend2xx, when set, makes the phone send its next 2xx to a
	// re-INVITE again once the channel closes (a retransmission after a
	// lost ACK); it is used once.
	resend2xx chan struct{}
	acked     map[string]bool // "Call-ID CSeq" of the ACKs received (noteAck)
	// optionsCode answers in-dialog OPTIONS; 0 = no answer at all.
	optionsCode atomic.Int32
	// messageCode answers MESSAGEs; 0 = 200.
	messageCode atomic.Int32
	// beforeBye, when set (under mu), runs before a BYE is answered.
	beforeBye func(*sip.Request)
	// offer is the SDP of the phone's calls (nil = sdpA); set before dialling.
	offer []byte
	busy  atomic.Int64 // INVITE handlers running (serve waits for 0)
	// o= of answerMirror's answers (under mu): the phone's own session
	sdpUser string
	sdpSess int
	ver     int

	reinvites chan *sip.Request               // in-dialog INVITEs received
	updates   chan *sip.Request               // UPDATEs received
	notifies  chan *sip.Request               // NOTIFYs received (answered 200)
	strays    chan *sip.Response              // responses no transaction took (a 2xx retransmitted for a late ACK)
	options   chan *sip.Request               // in-dialog OPTIONS received
	pracks    chan *sip.Request               // PRACKs received (answered 200)
	messages  chan *sip.Request               // MESSAGEs received (answered messageCode)
	invites   chan *sip.Request               // INVITEs received
	cancelled chan error                      // cause when a ringing INVITE ended unanswered
	acks      chan *sip.Request               // ACKs received
	byes      chan *sip.Request               // BYEs received
	answered  chan *sipgo.DialogServerSession // UAS dialogs confirmed by ACK
}

func newPhone(t *testing.T, user string, sc script) *phone {
	t.Helper()
	closing := new(atomic.Bool)
	strays := make(chan *sip.Response, 16)
	ua, err := newUA(closing, sipgo.WithUserAgent("phone-"+user),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerUnhandledResponseHandler(func(r *sip.Response) {
			select {
			case strays <- r:
			default:
			}
		})))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sipgo.NewServer(ua)
	if err != nil {
		t.Fatal(err)
	}
	conn := listenUDP(t)
	addr := conn.LocalAddr().(*net.UDPAddr)
	p := &phone{
		t: t, user: user, addr: addr.String(), host: addr.IP.String(), port: addr.Port, script: sc,
		invites:   make(chan *sip.Request, 16),
		cancelled: make(chan error, 16),
		acks:      make(chan *sip.Request, 16),
		byes:      make(chan *sip.Request, 16),
		answered:  make(chan *sipgo.DialogServerSession, 16),
		reinvites: make(chan *sip.Request, 16),
		updates:   make(chan *sip.Request, 16),
		notifies:  make(chan *sip.Request, 16),
		options:   make(chan *sip.Request, 64),
		pracks:    make(chan *sip.Request, 16),
		messages:  make(chan *sip.Request, 16),
		strays:    strays,
	}
	p.optionsCode.Store(200)
	p.cli, err = sipgo.NewClient(ua, sipgo.WithClientConnectionAddr(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	contact := sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: user, Host: p.host, Port: p.port}}
	p.dsc = sipgo.NewDialogServerCache(p.cli, contact)
	p.dcc = sipgo.NewDialogClientCache(p.cli, contact)
	srv.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) {
		p.busy.Add(1)
		defer p.busy.Add(-1)
		if req.To().Params.Has("tag") {
			p.reinvites <- req
			p.answerInDialog(req, tx)
			return
		}
		p.invites <- req
		d, err := p.dsc.ReadInvite(req, tx)
		if err == nil {
			// A CANCELled INVITE is answered 487 by sipgo; stay until the
			// box ACKs it (see serve).
			defer func() {
				if errors.Is(context.Cause(d.Context()), sip.ErrTransactionCanceled) {
					select {
					case <-tx.Acks():
					case <-tx.Done():
					case <-time.After(wait):
					}
				}
			}()
		}
		if err != nil {
			t.Errorf("%s: read invite: %v", user, err)
			return
		}
		// No d.Close here: that drops the dialog from the cache and a later
		// BYE would get 481. ReadBye closes it.
		p.mu.Lock()
		sc := p.script
		p.mu.Unlock()
		if sc != nil {
			sc(p, d, req)
		}
	})
	srv.OnMessage(func(req *sip.Request, tx sip.ServerTransaction) {
		p.messages <- req
		code := int(p.messageCode.Load())
		if code == 0 {
			code = 200
		}
		_ = tx.Respond(sip.NewResponseFromRequest(req, code, reasonPhrase(code), nil))
	})
	srv.OnAck(func(req *sip.Request, tx sip.ServerTransaction) {
		p.noteAck(req)
		p.acks <- req
		_ = p.dsc.ReadAck(req, tx)
	})
	srv.OnBye(func(req *sip.Request, tx sip.ServerTransaction) {
		p.mu.Lock()
		before := p.beforeBye
		p.mu.Unlock()
		if before != nil {
			before(req)
		}
		if err := p.dsc.ReadBye(req, tx); err == nil {
			p.byes <- req
			return
		}
		if err := p.dcc.ReadBye(req, tx); err == nil {
			p.byes <- req
			return
		}
		t.Errorf("%s: BYE outside any dialog: %s", user, req.StartLine())
		_ = tx.Respond(sip.NewResponseFromRequest(req, 481, "No Dialog", nil))
	})
	srv.OnUpdate(func(req *sip.Request, tx sip.ServerTransaction) {
		p.updates <- req
		p.answerInDialog(req, tx)
	})
	srv.OnPrack(func(req *sip.Request, tx sip.ServerTransaction) {
		p.pracks <- req
		_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	})
	srv.OnNotify(func(req *sip.Request, tx sip.ServerTransaction) {
		p.notifies <- req
		_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	})
	srv.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		select {
		case p.options <- req:
		default:
		}
		if code := int(p.optionsCode.Load()); code != 0 {
			_ = tx.Respond(sip.NewResponseFromRequest(req, code, "", nil))
		}
	})
	serve(t, ua, srv, conn, closing, &p.busy)
	t.Logf("phone %s at %s", user, p.addr)
	return p
}

// answerInDialog answers a re-INVITE or UPDATE with p.onReinvite, or
// with answerMirror.
func (p *phone) answerInDialog(req *sip.Request, tx sip.ServerTransaction) {
	p.mu.Lock()
	f := p.onReinvite
	p.mu.Unlock()
	if f == nil {
		f = answerMirror
	}
	code, body := f(p, req)
	res := sip.NewResponseFromRequest(req, code, "", body)
	if len(body) > 0 {
		res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	}
	if code < 300 {
		res.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: p.user, Host: p.host, Port: p.port}})
	}
	if err := tx.Respond(res); err != nil {
		p.t.Errorf("%s: answer %s: %v", p.user, req.Method, err)
	}
	p.mu.Lock()
	again := p.resend2xx
	if code < 300 && req.Method == sip.INVITE {
		p.resend2xx = nil
	} else {
		again = nil
	}
	p.mu.Unlock()
	if again != nil {
		select {
		case <-again:
			if err := tx.Respond(res); err != nil {
				p.t.Errorf("%s: retransmit 2xx: %v", p.user, err)
			}
		case <-time.After(wait):
		}
	}
}

// noteAck records an ACK's Call-ID and CSeq (ackedInvite).
func (p *phone) noteAck(ack *sip.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acked == nil {
		p.acked = map[string]bool{}
	}
	p.acked[ack.CallID().Value()+" "+strconv.Itoa(int(ack.CSeq().SeqNo))] = true
}

// ackedInvite reports whether the phone got an ACK for inv. sipgo's
// Respond of a 2xx may fail although the ACK came: its retransmission
// timer (T1) and the ACK can be ready at once, and a BYE right behind
// the ACK ends the transaction the retransmission goes to.
func (p *phone) ackedInvite(inv *sip.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked[inv.CallID().Value()+" "+strconv.Itoa(int(inv.CSeq().SeqNo))]
}

func (p *phone) contact() Contact {
	return Contact{URI: fmt.Sprintf("sip:%s@%s", p.user, p.addr), Transport: "udp", Addr: p.addr}
}

// Scripts.

func respondOrFail(p *phone, d *sipgo.DialogServerSession, code int, body []byte) {
	var err error
	if body != nil {
		err = d.Respond(code, "", body, sip.NewHeader("Content-Type", "application/sdp"))
	} else {
		err = d.Respond(code, "", nil)
	}
	if err != nil {
		p.t.Errorf("%s: respond %d: %v", p.user, code, err)
	}
}

// ringUntil sends 180 and answers with 200 + sdpB when release closes; if
// the INVITE is cancelled first it reports to p.cancelled.
func ringUntil(release <-chan struct{}) script {
	return func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		respondOrFail(p, d, 180, nil)
		select {
		case <-release:
		case <-d.Context().Done():
			p.cancelled <- context.Cause(d.Context())
			return
		case <-time.After(wait):
			p.t.Errorf("%s: never released", p.user)
			return
		}
		p.answeredWithB()
		if err := d.Respond(200, "OK", sdpB, sip.NewHeader("Content-Type", "application/sdp")); err != nil {
			p.t.Errorf("%s: 200: %v", p.user, err)
			return
		}
		p.answered <- d
	}
}

// answeredWithB records that the phone's session is sdpB (o=b 2 2).
func (p *phone) answeredWithB() {
	p.mu.Lock()
	p.sdpUser, p.sdpSess, p.ver = "b", 2, 2
	p.mu.Unlock()
}

func ringForever(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
	respondOrFail(p, d, 180, nil)
	select {
	case <-d.Context().Done():
		p.cancelled <- context.Cause(d.Context())
	case <-time.After(2 * wait):
		p.t.Errorf("%s: INVITE never cancelled", p.user)
	}
}

func reject(code int) script {
	return func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		respondOrFail(p, d, code, nil)
	}
}

func answerNow(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
	p.answeredWithB()
	if err := d.Respond(200, "OK", sdpB, sip.NewHeader("Content-Type", "application/sdp")); err != nil {
		p.t.Errorf("%s: 200: %v", p.user, err)
		return
	}
	p.answered <- d
}

// outcall is a call placed by a phone through the box.
type outcall struct {
	sess  *sipgo.DialogClientSession
	codes chan int // every response code seen, in order
	err   error
	final int // final status (0 when WaitAnswer failed without one)
}

// dial calls number at the box. onResp, if set, runs on every response
// (in the WaitAnswer goroutine).
func (p *phone) dial(ctx context.Context, box, number string, onResp func(*sip.Response)) *outcall {
	p.t.Helper()
	return p.dialWith(ctx, box, number, nil, onResp)
}

// dialWith is dial with extra headers on the INVITE.
func (p *phone) dialWith(ctx context.Context, box, number string, hdrs []sip.Header, onResp func(*sip.Response)) *outcall {
	p.t.Helper()
	host, port, _ := sip.ParseAddr(box)
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: number, Host: host, Port: port})
	from := &sip.FromHeader{DisplayName: "Caller " + p.user, Address: sip.Uri{Scheme: "sip", User: p.user, Host: p.host}}
	from.Params.Add("tag", sip.GenerateTagN(10))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: number, Host: host}})
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	for _, h := range hdrs {
		req.AppendHeader(h)
	}
	body := sdpA
	if p.offer != nil {
		body = p.offer
	}
	req.SetBody(body)
	oc := &outcall{codes: make(chan int, 32)}
	sess, err := p.dcc.WriteInvite(ctx, req)
	if err != nil {
		p.t.Errorf("invite: %v", err) // not Fatal: dial may run off the test goroutine
		oc.err = err
		return oc
	}
	oc.sess = sess
	oc.err = waitAnswer(ctx, sess, func(r *sip.Response) {
		select {
		case oc.codes <- r.StatusCode:
		default:
		}
		if onResp != nil {
			onResp(r)
		}
	})
	var de *sipgo.ErrDialogResponse
	switch {
	case oc.err == nil:
		oc.final = sess.InviteResponse.StatusCode
	case errors.As(oc.err, &de):
		oc.final = de.Res.StatusCode
	case sess.InviteResponse != nil && !sess.InviteResponse.IsProvisional():
		oc.final = sess.InviteResponse.StatusCode
	}
	return oc
}

func (oc *outcall) seen(code int) bool {
	for {
		select {
		case c := <-oc.codes:
			if c == code {
				return true
			}
		default:
			return false
		}
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLocalCallCallerHangsUp(t *testing.T) {
	e := newEnv(t, Config{})
	release := make(chan struct{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringUntil(release))
	e.loc.set("1002", b.contact())

	ctx := testCtx(t)
	var once sync.Once
	oc := a.dial(ctx, e.box, "1002", func(r *sip.Response) {
		if r.StatusCode == 180 {
			once.Do(func() { close(release) })
		}
	})
	if oc.err != nil {
		t.Fatalf("call failed: %v", oc.err)
	}
	if !oc.seen(180) {
		t.Error("180 not relayed")
	}
	if got := string(oc.sess.InviteResponse.Body()); got != string(sdpB) {
		t.Errorf("200 body = %q, want B's SDP", got)
	}
	if ct := oc.sess.InviteResponse.ContentType(); ct == nil || ct.Value() != "application/sdp" {
		t.Errorf("200 Content-Type = %v", ct)
	}
	inv := recv(t, b.invites, "INVITE at B")
	if string(inv.Body()) != string(sdpA) {
		t.Errorf("B-leg INVITE body = %q, want A's SDP", inv.Body())
	}
	if inv.CallID().Value() == oc.sess.InviteRequest.CallID().Value() {
		t.Error("B leg reuses the A leg's Call-ID")
	}
	if f := inv.From(); f.Address.User != "1001" || f.Address.Host != "127.0.0.1" {
		t.Errorf("B-leg From = %s", f.Value())
	}
	if ct := inv.Contact(); ct == nil || ct.Address.HostPort() != e.box {
		t.Errorf("B-leg Contact = %v, want the box %s", ct, e.box)
	}
	if v := inv.Via(); v == nil || fmt.Sprintf("%s:%d", v.Host, v.Port) != e.box {
		t.Errorf("B-leg Via = %v, want sent-by %s", v, e.box)
	}
	if inv.Source() != e.box {
		t.Errorf("B-leg INVITE came from %s, want the box's listener %s", inv.Source(), e.box)
	}
	if mf := inv.MaxForwards(); mf == nil || mf.Val() != 69 {
		t.Errorf("B-leg Max-Forwards = %v, want 69", mf)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.acks, "ACK at B")
	recv(t, b.answered, "B dialog confirmed")

	calls := e.b.Calls()
	if len(calls) != 1 || calls[0].State != StateAnswered || calls[0].Route != dialplan.RouteLocal ||
		calls[0].From != "1001" || calls[0].To != "1002" || calls[0].Answered.IsZero() {
		t.Errorf("Calls() = %+v", calls)
	}

	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatalf("bye: %v", err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

func TestLocalCallCalleeHangsUp(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())

	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "1002", nil)
	if oc.err != nil {
		t.Fatalf("call failed: %v", oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	d := recv(t, b.answered, "B dialog confirmed")
	if err := d.Bye(ctx); err != nil {
		t.Fatalf("B's bye: %v", err)
	}
	recv(t, a.byes, "BYE at A")
	e.noCalls()
}

func TestForkSecondContactAnswers(t *testing.T) {
	e := newEnv(t, Config{})
	release := make(chan struct{})
	a := newPhone(t, "1001", nil)
	b1 := newPhone(t, "1002", ringForever)
	b2 := newPhone(t, "1002", func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		// Answer only after A saw the first contact's 180, so that the box
		// has a provisional response from it and CANCELs it.
		select {
		case <-release:
		case <-time.After(wait):
		}
		answerNow(p, d, req)
	})
	e.loc.set("1002", b1.contact(), b2.contact())

	ctx := testCtx(t)
	var once sync.Once
	oc := a.dial(ctx, e.box, "1002", func(r *sip.Response) {
		if r.StatusCode == 180 {
			once.Do(func() { close(release) })
		}
	})
	if oc.err != nil {
		t.Fatalf("call failed: %v", oc.err)
	}
	if oc.final != 200 || string(oc.sess.InviteResponse.Body()) != string(sdpB) {
		t.Errorf("A got %d %q", oc.final, oc.sess.InviteResponse.Body())
	}
	if cause := recv(t, b1.cancelled, "CANCEL at the first contact"); !errors.Is(cause, sip.ErrTransactionCanceled) {
		t.Errorf("first contact ended with %v, want a CANCEL", cause)
	}
	recv(t, b1.invites, "INVITE at contact 1")
	recv(t, b2.invites, "INVITE at contact 2")
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b2.answered, "contact 2 confirmed")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b2.byes, "BYE at contact 2")
	if len(b1.byes) != 0 || len(b1.acks) != 0 {
		t.Error("the cancelled contact got an ACK or BYE")
	}
	e.noCalls()
}

func TestForkBusyWinsOverUnavailable(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b1 := newPhone(t, "1002", reject(480))
	b2 := newPhone(t, "1002", reject(486))
	e.loc.set("1002", b1.contact(), b2.contact())
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 486 {
		t.Errorf("A got %d (%v), want 486", oc.final, oc.err)
	}
	e.noCalls()
}

func TestBusy(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", reject(486))
	e.loc.set("1002", b.contact())
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 486 {
		t.Errorf("A got %d (%v), want 486", oc.final, oc.err)
	}
	e.noCalls()
}

func TestNoContactsAndUnknownNumber(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	if oc := a.dial(ctx, e.box, "1003", nil); oc.final != 480 {
		t.Errorf("no contacts: A got %d (%v), want 480", oc.final, oc.err)
	}
	if oc := a.dial(ctx, e.box, "5555", nil); oc.final != 404 {
		t.Errorf("unknown number: A got %d (%v), want 404", oc.final, oc.err)
	}
	e.noCalls()
}

func TestMaxForwardsZero(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	host, port, _ := sip.ParseAddr(e.box)
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "1002", Host: host, Port: port})
	mf := sip.MaxForwardsHeader(0)
	req.AppendHeader(&mf)
	ctx := testCtx(t)
	sess, err := a.dcc.WriteInvite(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	err = sess.WaitAnswer(ctx, sipgo.AnswerOptions{})
	if s := errorStatus(err); s != 483 {
		t.Errorf("A got %d (%v), want 483", s, err)
	}
	if len(b.invites) != 0 {
		t.Error("callee got an INVITE")
	}
	e.noCalls()
}

func TestCallerCancelsWhileRinging(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	e.loc.set("1002", b.contact())

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	oc := a.dial(ctx, e.box, "1002", func(r *sip.Response) {
		if r.StatusCode == 180 {
			cancel() // hang up while ringing: WaitAnswer sends CANCEL
		}
	})
	if !errors.Is(oc.err, context.Canceled) {
		t.Errorf("WaitAnswer = %v, want context.Canceled", oc.err)
	}
	if oc.final != 487 {
		t.Errorf("A got %d, want 487", oc.final)
	}
	if cause := recv(t, b.cancelled, "CANCEL at B"); !errors.Is(cause, sip.ErrTransactionCanceled) {
		t.Errorf("B ended with %v, want a CANCEL", cause)
	}
	e.noCalls()
}

func TestRingTimeout(t *testing.T) {
	e := newEnv(t, Config{RingTimeout: 500 * time.Millisecond})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	e.loc.set("1002", b.contact())
	start := time.Now()
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 480 {
		t.Errorf("A got %d (%v), want 480", oc.final, oc.err)
	}
	if el := time.Since(start); el < 400*time.Millisecond {
		t.Errorf("answered after %v, before the ring timeout", el)
	}
	if cause := recv(t, b.cancelled, "CANCEL at B"); !errors.Is(cause, sip.ErrTransactionCanceled) {
		t.Errorf("B ended with %v, want a CANCEL", cause)
	}
	e.noCalls()
}

func TestPSTNFailoverOn503(t *testing.T) {
	gw1 := newPhone(t, "gw1", reject(503))
	gw2 := newPhone(t, "gw2", answerNow)
	e := newEnv(t, Config{PSTNGateways: pstn("udp:"+gw1.addr, "udp:"+gw2.addr)})
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "90441234567", nil)
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200", oc.final, oc.err)
	}
	for i, gw := range []*phone{gw1, gw2} {
		inv := recv(t, gw.invites, "INVITE at gateway "+strconv.Itoa(i+1))
		if inv.Recipient.User != "0441234567" {
			t.Errorf("gateway %d: Request-URI user %q, want the stripped number", i+1, inv.Recipient.User)
		}
	}
	if c := e.b.Calls(); len(c) != 1 || c[0].Route != dialplan.RoutePSTN || c[0].Target != "0441234567" {
		t.Errorf("Calls() = %+v", c)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, gw2.answered, "gateway 2 confirmed")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, gw2.byes, "BYE at gateway 2")
	e.noCalls()
}

func TestPSTNNoFailoverOn404(t *testing.T) {
	gw1 := newPhone(t, "gw1", reject(404))
	gw2 := newPhone(t, "gw2", answerNow)
	e := newEnv(t, Config{PSTNGateways: pstn("udp:"+gw1.addr, "udp:"+gw2.addr)})
	a := newPhone(t, "1001", nil)
	oc := a.dial(testCtx(t), e.box, "90441234567", nil)
	if oc.final != 404 {
		t.Errorf("A got %d (%v), want 404", oc.final, oc.err)
	}
	recv(t, gw1.invites, "INVITE at gateway 1")
	if len(gw2.invites) != 0 {
		t.Error("gateway 2 got an INVITE after a 404")
	}
	e.noCalls()
}

func TestPSTNFailoverOnNoResponse(t *testing.T) {
	// A socket that never answers stands in for a dead gateway.
	dead := listenUDP(t)
	t.Cleanup(func() { _ = dead.Close() })
	gw2 := newPhone(t, "gw2", reject(486))
	e := newEnv(t, Config{
		PSTNGateways:   pstn("udp:"+dead.LocalAddr().String(), "udp:"+gw2.addr),
		AttemptTimeout: 300 * time.Millisecond,
	})
	a := newPhone(t, "1001", nil)
	oc := a.dial(testCtx(t), e.box, "90441234567", nil)
	if oc.final != 486 {
		t.Errorf("A got %d (%v), want gateway 2's 486", oc.final, oc.err)
	}
	recv(t, gw2.invites, "INVITE at gateway 2")
	e.noCalls()
}

func TestNewRejectsBadConfig(t *testing.T) {
	ua, err := sipgo.NewUA()
	if err != nil {
		t.Fatal(err)
	}
	defer ua.Close()
	loc := &fakeLocator{m: map[string][]Contact{}}
	plan, _ := dialplan.Compile(dialplan.Config{})
	for _, cfg := range []Config{
		{PSTNGateways: pstn("tls:198.18.3.2")}, // no TLS client configuration yet
		{PSTNGateways: unparsedGateway},        // a zero transport and port
		{LocalAddr: "example.com:5060"},
		{ContactHost: "::bad::"},
	} {
		if _, err := New(ua, cfg, loc, planRouter{p: plan}, nil); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	if _, err := New(ua, Config{}, nil, planRouter{p: plan}, nil); err == nil {
		t.Error("New without a locator accepted")
	}
}

func TestRank(t *testing.T) {
	order := []int{603, 486, 404, 480, 503, 408, 0}
	for i := 1; i < len(order); i++ {
		if rank(order[i-1]) <= rank(order[i]) {
			t.Errorf("rank(%d) <= rank(%d)", order[i-1], order[i])
		}
	}
}

func TestFork6xxEndsForking(t *testing.T) {
	e := newEnv(t, Config{})
	release := make(chan struct{})
	a := newPhone(t, "1001", nil)
	b1 := newPhone(t, "1002", ringForever)
	b2 := newPhone(t, "1002", func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		select {
		case <-release: // A saw b1's 180: the box may CANCEL b1
		case <-time.After(wait):
		}
		respondOrFail(p, d, 603, nil)
	})
	e.loc.set("1002", b1.contact(), b2.contact())
	var once sync.Once
	oc := a.dial(testCtx(t), e.box, "1002", func(r *sip.Response) {
		if r.StatusCode == 180 {
			once.Do(func() { close(release) })
		}
	})
	if oc.final != 603 {
		t.Errorf("A got %d (%v), want 603", oc.final, oc.err)
	}
	if cause := recv(t, b1.cancelled, "CANCEL at the ringing contact"); !errors.Is(cause, sip.ErrTransactionCanceled) {
		t.Errorf("ringing contact ended with %v, want a CANCEL", cause)
	}
	e.noCalls()
}

func TestCallerByeWhileRinging(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	e.loc.set("1002", b.contact())

	ctx := testCtx(t)
	ringing := make(chan *sip.Response, 1)
	done := make(chan *outcall, 1)
	go func() {
		done <- a.dial(ctx, e.box, "1002", func(r *sip.Response) {
			if r.StatusCode == 180 {
				select {
				case ringing <- r:
				default:
				}
			}
		})
	}()
	r := recv(t, ringing, "180 at A")
	// BYE on the early dialog (allowed to a caller by RFC 3261 §15).
	host, port, _ := sip.ParseAddr(e.box)
	bye := sip.NewRequest(sip.BYE, sip.Uri{Scheme: "sip", User: "1002", Host: host, Port: port})
	bye.AppendHeader(sip.HeaderClone(r.From()))
	bye.AppendHeader(sip.HeaderClone(r.To()))
	bye.AppendHeader(sip.HeaderClone(r.CallID()))
	bye.AppendHeader(&sip.CSeqHeader{SeqNo: r.CSeq().SeqNo + 1, MethodName: sip.BYE})
	res, err := a.cli.Do(ctx, bye)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("early BYE: %v %v", res, err)
	}
	oc := recv(t, done, "end of the INVITE")
	if oc.final != 487 {
		t.Errorf("A's INVITE got %d (%v), want 487", oc.final, oc.err)
	}
	if cause := recv(t, b.cancelled, "CANCEL at B"); !errors.Is(cause, sip.ErrTransactionCanceled) {
		t.Errorf("B ended with %v, want a CANCEL", cause)
	}
	e.noCalls()
}

// TestCallerCancelsBeforeCalleeResponds: A cancels once B has the INVITE
// but before B's script said anything (RFC 3261 §9.1: the box may CANCEL
// only after a provisional). A's CANCEL leaves once the box's 100 Trying
// reaches it, 200 ms in (Timer_1xx: the box sends no 100 at once), when
// B's stack sends its own 100 too; the box's CANCEL follows whichever of
// B's responses comes first.
func TestCallerCancelsBeforeCalleeResponds(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	invited, release := make(chan struct{}), make(chan struct{})
	b := newPhone(t, "1002", func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		close(invited)
		select { // say nothing until A has given up
		case <-release:
		case <-d.Context().Done(): // cancelled after B's stack's 100
			p.cancelled <- context.Cause(d.Context())
			return
		case <-time.After(wait):
		}
		ringForever(p, d, req)
	})
	e.loc.set("1002", b.contact())

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	// Not on the box's 100 Trying: on a busy machine A's CANCEL could then
	// beat the B-leg INVITE, and the box rightly never calls B.
	go func() {
		select {
		case <-invited:
			cancel()
		case <-ctx.Done():
		}
	}()
	oc := a.dial(ctx, e.box, "1002", nil)
	close(release)
	if oc.final != 487 {
		t.Errorf("A got %d (%v), want 487", oc.final, oc.err)
	}
	// B's first response lets the box send the CANCEL it owes.
	if cause := recv(t, b.cancelled, "CANCEL at B"); !errors.Is(cause, sip.ErrTransactionCanceled) {
		t.Errorf("B ended with %v, want a CANCEL", cause)
	}
	e.noCalls()
}

// TestMaxCalls: beyond Config.MaxCalls calls in progress a new INVITE gets
// 503 with Retry-After; once the first call ends, calls are admitted again.
func TestMaxCalls(t *testing.T) {
	e := newEnv(t, Config{MaxCalls: 1})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	e.loc.set("1002", b.contact())

	ctx, cancel := context.WithCancel(testCtx(t))
	ringing := make(chan struct{})
	first := make(chan *outcall, 1)
	go func() {
		first <- a.dial(ctx, e.box, "1002", func(r *sip.Response) {
			if r.StatusCode == 180 {
				close(ringing)
			}
		})
	}()
	recv(t, ringing, "the first call ringing")
	var retryAfter string
	oc := a.dial(testCtx(t), e.box, "1002", func(r *sip.Response) {
		if h := r.GetHeader("Retry-After"); h != nil {
			retryAfter = h.Value()
		}
	})
	if oc.final != 503 || retryAfter == "" {
		t.Errorf("second call over MaxCalls 1: %d, Retry-After %q; want 503 with Retry-After", oc.final, retryAfter)
	}
	cancel()
	if f := <-first; f.final != 487 {
		t.Errorf("first call after CANCEL: %d, want 487", f.final)
	}
	recv(t, b.cancelled, "CANCEL at B")
	e.noCalls()
	c := newPhone(t, "1003", reject(486))
	e.loc.set("1003", c.contact())
	if oc := a.dial(testCtx(t), e.box, "1003", nil); oc.final != 486 {
		t.Errorf("a call once the first ended: %d, want 486 from the callee", oc.final)
	}
}
