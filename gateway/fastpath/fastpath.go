package fastpath

import (
	"bytes"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"
)

// udpSockets maps a listener's local address (the net.Addr value sipgo
// passes to the read filter) to its socket.
type udpSockets map[net.Addr]udpSocket

// udpSocket is a listener and its name ("udp:127.0.0.1:5060"), made once.
type udpSocket struct {
	pc   net.PacketConn
	name string
}

// Answer answers an out-of-dialog REGISTER or OPTIONS that arrived on the
// UDP socket named local (e.g. "udp:127.0.0.1:5060"). The request's source
// and transport are set. It runs on the socket's read goroutine.
type Answer func(req *sip.Request, local string) *sip.Response

// Path is the stateless UDP path: sipgo's read filter (Filter) plus the
// retransmission cache, and the admission of new INVITEs (invite.go).
type Path struct {
	answer  Answer
	admit   Admit
	log     *slog.Logger
	sockets atomic.Pointer[udpSockets]
	cache   *answerCache
	refusal *sourceLimiter // stateless refusals of INVITEs per source IP
	bufs    sync.Pool
	drops   [numKinds]atomic.Uint64
	// Server transactions (servertx.go), when Serve was called.
	serve    *Handlers
	txs      *serverTxs
	handlers *workers
}

// Option adjusts a Path.
type Option func(*Path)

// WithClock injects the time source of the refusal rate limit (tests).
func WithClock(now func() time.Time) Option {
	return func(f *Path) { f.refusal.now = now }
}

// WithRefusalRate sets the per-source rate (per second) and burst of
// stateless refusals; defaults RefusalRate and RefusalBurst.
func WithRefusalRate(rate, burst float64) Option {
	return func(f *Path) { f.refusal.rate, f.refusal.burst = rate, burst }
}

// SetRefusalRate changes the per-source rate (per second) and burst of
// stateless refusals from now on; a rate of 0 or less lifts the limit.
func (f *Path) SetRefusalRate(rate, burst float64) {
	f.refusal.set(rate, burst)
}

// New returns a Path that answers REGISTER and OPTIONS with answer, admits
// new INVITEs with admit (nil = every INVITE goes to sipgo) and logs at
// debug level to log (nil = discard). It answers on no socket until
// SetSockets.
func New(answer Answer, admit Admit, log *slog.Logger, opts ...Option) *Path {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Path{answer: answer, admit: admit, log: log, cache: newAnswerCache(), refusal: newSourceLimiter(RefusalRate, RefusalBurst, time.Now),
		txs: newServerTxs(), handlers: newWorkers()}
	for _, o := range opts {
		o(f)
	}
	f.bufs.New = func() any { return new(bytes.Buffer) }
	f.sockets.Store(&udpSockets{})
	return f
}

// SetSockets publishes the current UDP listeners: datagrams that arrive on
// other sockets are passed on to sipgo.
func (f *Path) SetSockets(pcs []net.PacketConn) {
	m := udpSockets{}
	for _, pc := range pcs {
		m[pc.LocalAddr()] = udpSocket{pc, "udp:" + pc.LocalAddr().String()}
	}
	f.sockets.Store(&m)
}

// Kinds of datagrams the path drops, counted apart (Drops).
const (
	KindNotSIP       = "not_sip"       // garbage, or a keep-alive
	KindUnparseable  = "unparseable"   // a REGISTER, OPTIONS, INVITE or stateless ACK that does not parse
	KindRateLimited  = "rate_limited"  // a refusal over its source's rate, not sent
	KindStatelessAck = "stateless_ack" // the ACK of a stateless refusal, absorbed
)

const (
	kindNotSIP = iota
	kindUnparseable
	kindRateLimited
	kindStatelessAck
	numKinds
)

var kindNames = [numKinds]string{KindNotSIP, KindUnparseable, KindRateLimited, KindStatelessAck}

// Dropped counts UDP datagrams dropped unanswered, of every kind.
func (f *Path) Dropped() uint64 {
	var n uint64
	for i := range f.drops {
		n += f.drops[i].Load()
	}
	return n
}

// Drops counts dropped datagrams by kind (KindNotSIP, …).
func (f *Path) Drops() map[string]uint64 {
	out := make(map[string]uint64, numKinds)
	for i, name := range kindNames {
		out[name] = f.drops[i].Load()
	}
	return out
}

var (
	prefixRegister = []byte("REGISTER ")
	prefixOptions  = []byte("OPTIONS ")
	prefixInvite   = []byte("INVITE ")
	prefixAck      = []byte("ACK ")
	prefixCancel   = []byte("CANCEL ")
	prefixBye      = []byte("BYE ")
)

// Filter is sipgo's TransportReadFilter: it answers UDP REGISTER and
// OPTIONS itself, refuses unauthenticated INVITEs statelessly and absorbs
// the ACKs of those refusals, and, when Serve was called, runs the server
// transactions of the INVITEs it admits (with their CANCELs and ACKs) and
// of BYEs and hands on the ACKs of 2xx responses (returning nil so sipgo
// skips the datagram); it passes everything else on.
func (f *Path) Filter(info sip.TransportReadProps, data []byte) ([]byte, error) {
	if info.Transport != "UDP" {
		return data, nil
	}
	register := bytes.HasPrefix(data, prefixRegister)
	if !register && !bytes.HasPrefix(data, prefixOptions) {
		switch {
		case f.admit != nil && bytes.HasPrefix(data, prefixInvite):
			return f.filterInvite(info, data)
		case bytes.HasPrefix(data, prefixAck) && (f.serve != nil || bytes.Contains(data, statelessTagMark)):
			return f.filterAck(info, data)
		case f.serve != nil && bytes.HasPrefix(data, prefixCancel):
			return f.filterCancel(info, data)
		case f.serve != nil && bytes.HasPrefix(data, prefixBye):
			return f.filterBye(info, data)
		case !looksLikeSIP(data):
			f.drops[kindNotSIP].Add(1) // garbage or a keep-alive: nothing to answer
			return nil, nil
		}
		return data, nil
	}
	sock, ok := (*f.sockets.Load())[info.LocalAddr]
	if !ok {
		return data, nil
	}
	pc := sock.pc
	var raw rawHeaders
	req, ok := f.parse(info, data, &raw)
	if req == nil {
		if ok {
			return data, nil
		}
		return nil, nil
	}
	if to := req.To(); !register && to != nil && to.Params.Has("tag") {
		return data, nil // in-dialog OPTIONS: the B2BUA answers for its calls (481 when gone)
	}
	src := info.RemoteAddr.String()
	branch, _ := req.Via().Params.Get("branch")
	var kb [128]byte
	key := append(append(append(append(kb[:0], branch...), '|'), src...), '|')
	key = append(strconv.AppendUint(key, uint64(req.CSeq().SeqNo), 10), req.Method...)
	buf := f.bufs.Get().(*bytes.Buffer)
	defer f.bufs.Put(buf)
	buf.Reset()
	hit, epoch := f.cache.get(buf, key)
	if hit {
		f.write(pc, buf.Bytes(), info.RemoteAddr)
		return nil, nil
	}
	req.SetSource(src)
	req.SetTransport("UDP")
	tagged, tag := tagTo(req)
	res := f.answer(req, sock.name)

	writeAnswer(buf, res, &raw, tagged, tag)
	f.cache.put(key, buf.Bytes(), epoch, time.Now())
	f.write(pc, buf.Bytes(), info.RemoteAddr)
	return nil, nil
}

// ForgetAnswers drops the retransmission cache, so that a retransmission
// gets a fresh answer: the gateway calls it when the mode changes, since
// answers carry the survivable Warning (a retransmitted REGISTER then gets
// a new challenge, or is processed again, never a stale answer). An answer
// being made meanwhile is sent but not cached.
func (f *Path) ForgetAnswers() { f.cache.forget(time.Now()) }

// parse parses a datagram the path handles. A nil request with ok true
// goes on to sipgo (a response, or a request without the headers a
// transaction needs: sipgo answers those 400); ok false means it was
// dropped (does not parse).
func (f *Path) parse(info sip.TransportReadProps, data []byte, raw *rawHeaders) (*sip.Request, bool) {
	msg, err := parseRequest(data, raw)
	if err != nil {
		// sipgo would log the whole datagram at error level and answer
		// nothing: a log flood for whoever sends garbage. Count and drop.
		f.drops[kindUnparseable].Add(1)
		f.log.Debug("unparseable SIP datagram dropped", "from", info.RemoteAddr.String(), "err", err)
		return nil, false
	}
	req, ok := msg.(*sip.Request)
	if !ok || req.Via() == nil || req.CSeq() == nil || req.CallID() == nil {
		return nil, true
	}
	return req, true
}

// parseOr parses a datagram of the INVITE and transaction paths; without
// a request it returns what the filter returns instead: the datagram for
// sipgo (see parse), or nil (dropped).
func (f *Path) parseOr(info sip.TransportReadProps, data []byte) (*sip.Request, []byte) {
	req, ok := f.parse(info, data, nil)
	if req == nil && ok {
		return nil, data
	}
	return req, nil
}

// requestOn parses a datagram that arrived on one of the published
// sockets, which it returns too; without a request it returns what the
// filter returns instead (parseOr; the datagram when the socket is not
// published).
func (f *Path) requestOn(info sip.TransportReadProps, data []byte) (udpSocket, *sip.Request, []byte) {
	sock, ok := (*f.sockets.Load())[info.LocalAddr]
	if !ok {
		return sock, nil, data
	}
	req, pass := f.parseOr(info, data)
	return sock, req, pass
}

// writeResponse serializes res and sends it to to; keep returns a copy of
// the bytes sent.
func (f *Path) writeResponse(pc net.PacketConn, res *sip.Response, to net.Addr, keep bool) []byte {
	buf := f.bufs.Get().(*bytes.Buffer)
	defer f.bufs.Put(buf)
	buf.Reset()
	res.StringWrite(buf)
	f.write(pc, buf.Bytes(), to)
	if keep {
		return bytes.Clone(buf.Bytes())
	}
	return nil
}

// write sends an answer to where the request came from (RFC 3581: the
// source address, which is also right for phones behind NAT).
func (f *Path) write(pc net.PacketConn, b []byte, to net.Addr) {
	if _, err := pc.WriteTo(b, to); err != nil {
		f.log.Debug("sending response failed", "to", to.String(), "err", err)
	}
}

// looksLikeSIP accepts what could be a request or a response line: an
// upper-case token followed by a space, or "SIP/2.0 ".
func looksLikeSIP(b []byte) bool {
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z', c == '-', c == '_', c == '.', c == '!', c == '%', c == '*', c == '+', c == '`', c == '\'', c == '~':
		case c >= '0' && c <= '9', c == '/':
		case c == ' ':
			return i > 0
		default:
			return false
		}
	}
	return false
}
