package fastpath

import (
	"encoding/hex"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
	"golang.org/x/time/rate"
)

// Stateless refusals of new INVITEs (RFC 3261 §8.2.7, §16.7 step 10's
// stateless responses).
//
// A server transaction answers an INVITE's 4xx again and again over UDP
// (Timer G, until Timer H = 32 s: 11 copies) to whatever source the packet
// claimed, and keeps the request, timers and a goroutine meanwhile: a
// reflector and a memory sink for anyone who can send a datagram with a
// forged source. A request without valid credentials deserves neither.
// Its 407 (or 403) is sent once, from the read goroutine, and nothing is
// kept; a real client retransmits its INVITE until it gets an answer and
// gets the same answer again. The ACK it then sends carries the To tag of
// the refusal, which marks it as stateless: it is dropped here.

// Admit decides an out-of-dialog INVITE that arrived on the UDP socket
// named local, on the socket's read goroutine. A nil response admits it
// (a trusted trunk, or credentials that verify): it gets the path's
// transaction and handler (Serve), or goes on to sipgo's transaction
// layer as it is; a response is the refusal to send statelessly
// (407, 403, 400, or 503 when the box sheds calls). authenticated says
// the request's source passed the trust or credential check (the 503 of
// an overloaded box): its refusal is sent whatever the source's refusal
// rate, which exists to protect the claimed sources of forged requests.
// The request's source and transport are set. Admit may be called for a
// retransmission too (without Serve, or once the transaction is gone): it
// must admit the retransmission of an INVITE it admitted (credentials are
// verified once; a nonce count is not accepted twice).
type Admit func(req *sip.Request, local string) (res *sip.Response, authenticated bool)

// RefusalRate and RefusalBurst bound the stateless refusals sent to one
// source IP (per second, and at once) by default (the document's
// sip.registrar.challenge_rate sets them): a phone that is challenged
// needs one per call attempt, and a site's phones may share one address
// behind NAT; a flood of forged INVITEs gets no more than this reflected
// towards its claimed source. Beyond it refusals are dropped without a
// word and counted (KindRateLimited).
const (
	RefusalRate  = 200
	RefusalBurst = 400
)

// statelessTagPrefix starts the To tag of every stateless refusal; the
// ACK of such a refusal carries it back.
const statelessTagPrefix = "osl-"

var statelessTagMark = []byte("tag=" + statelessTagPrefix)

// tagSalt keeps the tags of one process from being predicted by a third
// party; the same request still gets the same tag (§8.2.7).
var tagSalt = rand.Uint64()

// statelessTag is the To tag of a stateless response to req: a function
// of the request, so a retransmission gets the same tag (RFC 3261 §8.2.7).
func statelessTag(req *sip.Request) string {
	h := fnv.New64a()
	var salt [8]byte
	for i := range salt {
		salt[i] = byte(tagSalt >> (8 * i))
	}
	h.Write(salt[:])
	if c := req.CallID(); c != nil {
		h.Write([]byte(c.Value()))
	}
	if from := req.From(); from != nil {
		t, _ := from.Params.Get("tag")
		h.Write([]byte("|" + t))
	}
	if via := req.Via(); via != nil {
		b, _ := via.Params.Get("branch")
		h.Write([]byte("|" + b))
	}
	return statelessTagPrefix + hex.EncodeToString(h.Sum(nil))
}

// filterInvite admits or refuses a UDP INVITE (see Admit).
func (f *Path) filterInvite(info sip.TransportReadProps, data []byte) ([]byte, error) {
	sock, req, pass := f.requestOn(info, data)
	if req == nil {
		return pass, nil
	}
	src := info.RemoteAddr.String()
	key, keyed := f.serverTxKey(req, src, sip.INVITE)
	if keyed {
		if tx := f.txs.get(key); tx != nil {
			tx.retransmission()
			return nil, nil
		}
	}
	req.SetSource(src)
	req.SetTransport("UDP")
	// A re-INVITE is not admitted here: its dialog authorises it.
	if to := req.To(); to == nil || !to.Params.Has("tag") {
		if res, authenticated := f.admit(req, sock.name); res != nil {
			f.refuse(sock.pc, info, req, res, authenticated)
			return nil, nil
		}
	}
	if !keyed {
		return data, nil
	}
	f.serveRequest(req, key, sock, info, f.serve.Invite)
	return nil, nil
}

// refuse sends the stateless refusal res of req, within the source's
// refusal rate unless its source is authenticated.
func (f *Path) refuse(pc net.PacketConn, info sip.TransportReadProps, req *sip.Request, res *sip.Response, authenticated bool) {
	if !authenticated && !f.refusal.allow(addrOf(info.RemoteAddr)) {
		f.drops[kindRateLimited].Add(1)
		return
	}
	if to := res.To(); to != nil {
		to.Params.Add("tag", statelessTag(req))
	}
	f.writeResponse(pc, res, info.RemoteAddr, false)
}

// filterAck drops the ACK of a stateless refusal (its To tag is ours,
// statelessTagPrefix). When the path serves INVITEs (Serve), the ACK of
// a non-2xx answer goes to its transaction and the ACK of a 2xx to the
// ACK handler; any other ACK goes on to sipgo.
func (f *Path) filterAck(info sip.TransportReadProps, data []byte) ([]byte, error) {
	req, pass := f.parseOr(info, data)
	if req == nil {
		return pass, nil
	}
	if to := req.To(); to != nil {
		if tag, _ := to.Params.Get("tag"); len(tag) > len(statelessTagPrefix) && tag[:len(statelessTagPrefix)] == statelessTagPrefix {
			f.drops[kindStatelessAck].Add(1)
			return nil, nil
		}
	}
	if f.serve == nil {
		return data, nil
	}
	src := info.RemoteAddr.String()
	key, keyed := f.serverTxKey(req, src, sip.INVITE)
	if !keyed {
		return data, nil // an RFC 2543 client's: sipgo matches it
	}
	if tx := f.txs.get(key); tx != nil {
		tx.ack(req)
		return nil, nil
	}
	req.SetSource(src)
	req.SetTransport("UDP")
	f.handlers.Go(func() { f.serve.Ack(req) })
	return nil, nil
}

func addrOf(a net.Addr) netip.Addr {
	// A *net.UDPAddr, or the listener's cached source (gateway/listen).
	if u, ok := a.(interface{ AddrPort() netip.AddrPort }); ok {
		return u.AddrPort().Addr().Unmap()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

// maxSources bounds the refusal limiter's table. Forged sources can fill
// it; then the sources whose bucket is full again are forgotten, and if
// that is not enough the table starts afresh (a source then gets at most
// another burst, one answer per request: never an amplification).
const maxSources = 8192

// sourceLimiter is a token bucket per source IP (golang.org/x/time/rate,
// read on the Path's clock so that tests step time).
type sourceLimiter struct {
	mu          sync.Mutex
	rate, burst float64
	now         func() time.Time
	m           map[netip.Addr]*rate.Limiter
}

func newSourceLimiter(perSecond, burst float64, now func() time.Time) *sourceLimiter {
	return &sourceLimiter{rate: perSecond, burst: burst, now: now, m: map[netip.Addr]*rate.Limiter{}}
}

func (l *sourceLimiter) allow(ip netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rate <= 0 {
		return true // no limit
	}
	now := l.now()
	b := l.m[ip]
	if b == nil {
		if len(l.m) >= maxSources {
			l.pruneLocked(now)
		}
		b = rate.NewLimiter(rate.Limit(l.rate), int(l.burst))
		l.m[ip] = b
	}
	return b.AllowN(now, 1)
}

// set changes rate and burst, of the sources known too: a source keeps
// the tokens it has (up to the new burst).
func (l *sourceLimiter) set(perSecond, burst float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate, l.burst = perSecond, burst
	now := l.now()
	for _, b := range l.m {
		b.SetLimitAt(now, rate.Limit(perSecond))
		b.SetBurstAt(now, int(burst))
	}
}

func (l *sourceLimiter) pruneLocked(now time.Time) {
	for ip, b := range l.m {
		if b.TokensAt(now) >= l.burst {
			delete(l.m, ip)
		}
	}
	if len(l.m) >= maxSources*3/4 {
		clear(l.m)
	}
}
