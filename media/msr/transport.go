package msr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/sipauth"
)

// Sockets opens the agent's sockets; *net.ListenConfig satisfies it. The
// appliance may pass a shared pool, tests one that binds inside a network
// namespace.
type Sockets interface {
	ListenPacket(ctx context.Context, network, address string) (net.PacketConn, error)
	Listen(ctx context.Context, network, address string) (net.Listener, error)
}

// regMsg is everything one REGISTER (or unREGISTER) says. The binding
// loop builds it; a sender turns it into SIP.
type regMsg struct {
	target     netip.AddrPort
	requestURI sip.Uri // sip:{msr-name}
	aor        sip.Uri // sip:{iface};{contact-id}@{msr-name}
	display    string  // interface-name(MEDIA-IP)
	contact    sip.Uri // sip:{iface};{contact-id}@{service-ip}:{port}
	callID     string
	fromTag    string
	cseq       uint32
	expires    int // seconds; 0 = unREGISTER
	headers    []header
	auth       sipgo.DigestAuth
}

type header struct{ name, value string }

// regResult is the final answer to a regMsg.
type regResult struct {
	status  int
	reason  string
	granted time.Duration // expiry the registrar granted (2xx only)
	cseq    uint32        // last CSeq used (a digest retry uses one more)
}

// sender sends one REGISTER transaction, answering a digest challenge
// once. An error means no final response (timeout, transport failure,
// cancelled).
type sender interface {
	send(ctx context.Context, m regMsg) (regResult, error)
	local() netip.AddrPort
}

// transport is the SIP side of the agent on one service address: a UDP
// socket bound to service-IP:port, served by a sipgo user agent, and a
// client that sends every request from exactly that socket (req.Laddr via
// WithClientConnectionAddr; LIBRARIES.md: otherwise sipgo may pick a new
// ephemeral socket whose Via says 0.0.0.0). Responses come back on the
// same socket and reach the client transactions. It answers OPTIONS with
// 200 (softswitches probe their MSRs) and other requests with 405.
type transport struct {
	laddr  netip.AddrPort
	conn   net.PacketConn
	ua     *sipgo.UserAgent
	client *sipgo.Client
	srv    *sipgo.Server
	log    *slog.Logger
	wg     sync.WaitGroup // the serving goroutine
	once   sync.Once

	mu      sync.Mutex
	closing bool
	users   sync.WaitGroup // sends in flight
}

func newTransport(ctx context.Context, socks Sockets, ip netip.Addr, port int, ms *mediaServer, log *slog.Logger) (*transport, error) {
	conn, err := socks.ListenPacket(ctx, "udp", netip.AddrPortFrom(ip, uint16(port)).String())
	if err != nil {
		return nil, fmt.Errorf("media/msr: bind SIP socket on %v: %w", ip, err)
	}
	ua2, ok := conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("media/msr: SIP socket on %v: not UDP", ip)
	}
	laddr := netip.AddrPortFrom(ip, uint16(ua2.Port))
	sipLog := log.With("part", "sipgo")
	ua, err := sipgo.NewUA(
		sipgo.WithUserAgent("outpost-msr"),
		sipgo.WithUserAgentHostname(ip.String()),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(sipLog)),
		sipgo.WithUserAgentTransactionLayerOptions(
			sip.WithTransactionLayerLogger(sipLog),
			sip.WithTransactionLayerUnhandledResponseHandler(func(*sip.Response) {}),
		),
	)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("media/msr: sip user agent: %w", err)
	}
	client, err := sipgo.NewClient(ua,
		sipgo.WithClientLogger(sipLog),
		sipgo.WithClientConnectionAddr(laddr.String()),
		sipgo.WithClientHostname(ip.String()),
		sipgo.WithClientPort(int(laddr.Port())),
	)
	if err != nil {
		_ = ua.Close()
		_ = conn.Close()
		return nil, fmt.Errorf("media/msr: sip client: %w", err)
	}
	srv, err := sipgo.NewServer(ua, sipgo.WithServerLogger(sipLog))
	if err != nil {
		_ = ua.Close()
		_ = conn.Close()
		return nil, fmt.Errorf("media/msr: sip server: %w", err)
	}
	srv.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		_ = tx.Respond(sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
	})
	t := &transport{laddr: laddr, conn: conn, ua: ua, client: client, srv: srv, log: log}
	if ms != nil {
		ms.install(t)
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		// Returns when conn is closed.
		_ = srv.ServeUDP(conn)
	}()
	// ServeUDP puts the socket into sipgo's connection pool from its own
	// goroutine, and sipgo has no readiness signal. A REGISTER sent before
	// that makes sipgo bind a second socket to the same address
	// (EADDRINUSE), so wait for the pool entry.
	pool := ua.TransportLayer().Pool("udp")
	for deadline := time.Now().Add(2 * time.Second); pool.Size() == 0; {
		if time.Now().After(deadline) {
			t.close()
			return nil, fmt.Errorf("media/msr: SIP socket on %v: not served within 2 s", laddr)
		}
		time.Sleep(50 * time.Microsecond)
	}
	return t, nil
}

func (t *transport) local() netip.AddrPort { return t.laddr }

// close refuses new sends, waits for those in flight (their contexts
// bound them), stops serving, closes the socket and the user agent and
// waits for the serving goroutine. Idempotent.
func (t *transport) close() {
	t.once.Do(func() {
		t.mu.Lock()
		t.closing = true
		t.mu.Unlock()
		t.users.Wait()
		_ = t.conn.Close()
		t.wg.Wait()
		_ = t.ua.Close()
	})
}

// send builds the REGISTER, sends it from the service socket to m.target
// and, on 401/407, answers the challenge once (RFC 3261 §22.2).
func (t *transport) send(ctx context.Context, m regMsg) (regResult, error) {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		return regResult{cseq: m.cseq}, fmt.Errorf("media/msr: REGISTER to %v: %w", m.target, errClosed)
	}
	t.users.Add(1)
	t.mu.Unlock()
	defer t.users.Done()
	req := buildRegister(m)
	res, err := t.client.Do(ctx, req)
	if err == nil && res == nil {
		err = errNoResponse // sipgo ends a transaction whose layer is closing with neither
	}
	if err != nil {
		return regResult{cseq: m.cseq}, fmt.Errorf("media/msr: REGISTER to %v: %w", m.target, err)
	}
	if res.StatusCode == sip.StatusUnauthorized || res.StatusCode == sip.StatusProxyAuthRequired {
		res, err = t.answerChallenge(ctx, req, res, m.auth)
		if err == nil && res == nil {
			err = errNoResponse
		}
		if err != nil {
			return regResult{cseq: req.CSeq().SeqNo}, fmt.Errorf("media/msr: REGISTER to %v with credentials: %w", m.target, err)
		}
	}
	r := regResult{status: res.StatusCode, reason: res.Reason, cseq: req.CSeq().SeqNo}
	if res.IsSuccess() {
		r.granted = grantedExpiry(res, m)
	}
	return r, nil
}

// answerChallenge sends req again with sipauth's answer to the 401/407
// res, as a new transaction: the next CSeq and a new Via (new branch).
func (t *transport) answerChallenge(ctx context.Context, req *sip.Request, res *sip.Response, auth sipgo.DigestAuth) (*sip.Response, error) {
	c := sipauth.Client{Username: auth.Username, Password: auth.Password}
	hdr, _ := sipauth.Headers(res.StatusCode)
	var chals []string
	for _, h := range res.GetHeaders(hdr) {
		chals = append(chals, h.Value())
	}
	if _, err := c.Challenge(res.StatusCode, chals); err != nil {
		return nil, err
	}
	name, value, err := c.Authorization(req.Method.String(), req.Recipient.String())
	if err != nil {
		return nil, err
	}
	req.RemoveHeader("Authorization")
	req.RemoveHeader("Proxy-Authorization")
	req.AppendHeader(sip.NewHeader(name, value))
	req.CSeq().SeqNo++
	req.RemoveHeader("Via")
	return t.client.Do(ctx, req)
}

// errClosed: the socket was replaced or closed.
var errClosed = errors.New("SIP socket closed")

// buildRegister writes m as a REGISTER request.
func buildRegister(m regMsg) *sip.Request {
	req := sip.NewRequest(sip.REGISTER, m.requestURI)
	req.SetTransport("UDP")
	req.SetDestination(m.target.String())
	from := &sip.FromHeader{DisplayName: m.display, Address: m.aor, Params: sip.NewParams()}
	from.Params.Add("tag", m.fromTag)
	to := &sip.ToHeader{DisplayName: m.display, Address: m.aor}
	callID := sip.CallIDHeader(m.callID)
	cseq := &sip.CSeqHeader{SeqNo: m.cseq, MethodName: sip.REGISTER}
	maxFwd := sip.MaxForwardsHeader(70)
	contact := &sip.ContactHeader{DisplayName: m.display, Address: m.contact}
	expires := sip.ExpiresHeader(m.expires)
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(&callID)
	req.AppendHeader(cseq)
	req.AppendHeader(&maxFwd)
	req.AppendHeader(contact)
	req.AppendHeader(&expires)
	for _, h := range m.headers {
		req.AppendHeader(sip.NewHeader(h.name, h.value))
	}
	req.AppendHeader(sip.NewHeader("User-Agent", "outpost-msr"))
	req.SetBody(nil)
	return req
}

// grantedExpiry reads the expiry the registrar granted to our contact:
// its expires parameter in the 200's Contact list, else the Expires
// header, else what we asked for (RFC 3261 §10.2.4).
func grantedExpiry(res *sip.Response, m regMsg) time.Duration {
	for _, h := range res.GetHeaders("Contact") {
		c, ok := h.(*sip.ContactHeader)
		if !ok {
			continue
		}
		if c.Address.User != m.contact.User || !sameHost(c.Address.Host, m.contact.Host) || c.Address.Port != m.contact.Port {
			continue
		}
		if v, ok := c.Params.Get("expires"); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return time.Duration(n) * time.Second
			}
		}
	}
	if e := res.GetHeader("Expires"); e != nil {
		if n, err := strconv.Atoi(strings.TrimSpace(e.Value())); err == nil && n >= 0 {
			return time.Duration(n) * time.Second
		}
	}
	return time.Duration(m.expires) * time.Second
}

func sameHost(a, b string) bool {
	pa, errA := netip.ParseAddr(strings.Trim(a, "[]"))
	pb, errB := netip.ParseAddr(strings.Trim(b, "[]"))
	if errA == nil && errB == nil {
		return pa == pb
	}
	return strings.EqualFold(a, b)
}

// errNoResponse is a transaction that ended without a response or an error.
var errNoResponse = errors.New("transaction ended without a response")
