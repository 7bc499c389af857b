package b2bua

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
	"golang.org/x/time/rate"

	"github.com/outpost/outpost/gateway/dialplan"
)

// Instant messages (RFC 3428 MESSAGE) between local users. A message is
// a request, not a dialog: the B2BUA sends its own MESSAGE, with the
// sender's identity and the same body, to every registered contact of
// the addressee at once; the first 2xx is the sender's answer and the
// other attempts are abandoned. No contact registered is 202 when
// Config.Offline keeps the message, else 480; every contact failing is
// the best failure (rank), 408 when none answered.
//
// Decisions: only text/plain and message/cpim (RFC 3862, which carries
// its own headers and any inner type) are passed, others get 415 with
// Accept; a body over MaxMessageBytes gets 413 (RFC 3428 §8: a MESSAGE
// is a page, not a file transfer). A sender may send a burst of
// messageBurst, then one a second; beyond that 503 with Retry-After (SIP
// has no "too many requests"), so a runaway client cannot flood phones.
const (
	// MaxMessageBytes is the largest message body relayed.
	MaxMessageBytes = 8 << 10
	// messageTimeout bounds one delivery (all contacts): under Timer F,
	// so a sender's transaction never outlives ours.
	messageTimeout = 8 * time.Second
	// messageBurst and messageRefill are each sender's budget.
	messageBurst  = 20
	messageRefill = 1 // per second
	// maxSenders bounds the budgets kept; senders are authenticated local
	// users, so only many pushes renaming users could reach it.
	maxSenders = 4096
)

// messageTypes are the bodies relayed, as Accept lists them.
const messageTypes = "text/plain, message/cpim"

// Message relays a MESSAGE from a local user the gateway authenticated,
// routed by pol's dial plan: to a local user's contacts, or to HQ's
// targets in order (the next on a retryable failure, as for calls). A
// message routed to the PSTN (an HQ user in survivable mode) cannot be
// delivered: 480; one with no route 404.
func (b *B2BUA) Message(req *sip.Request, tx sip.ServerTransaction, pol Policy) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	set := pol.Settings
	if to := req.To(); to != nil && to.Params.Has("tag") {
		respondWarn(set, tx, req, 481, "Call/Transaction Does Not Exist") // no dialogs for messages here
		return
	}
	ctype := strings.ToLower(mediaType(contentTypeOf(req)))
	switch {
	case len(req.Body()) > MaxMessageBytes:
		respondWarn(set, tx, req, 413, "Request Entity Too Large")
		return
	case ctype != "text/plain" && ctype != "message/cpim":
		respondWarn(set, tx, req, 415, "Unsupported Media Type", sip.NewHeader("Accept", messageTypes))
		return
	}
	if !b.msgs.allow(req.From().Address.User) {
		respondWarn(set, tx, req, 503, "Service Unavailable", sip.NewHeader("Retry-After", "1"))
		return
	}
	d, ok := pol.Router.Outbound(req.Recipient.User)
	switch {
	case !ok || d.Route == "":
		respondWarn(set, tx, req, 404, "Not Found")
		return
	case d.Route == dialplan.RouteHQ && set.cfg.HQ == nil || d.Route != dialplan.RouteLocal && d.Route != dialplan.RouteHQ:
		respondWarn(set, tx, req, 480, "Temporarily Unavailable")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), messageTimeout)
	defer cancel()
	ts, err := b.targets(ctx, set, d)
	atMember := len(ts) > 0 && ts[0].signed // the user is at another pool member: not kept here
	ts = reachable(ts)
	if err != nil || len(ts) == 0 {
		if d.Route == dialplan.RouteLocal && set.cfg.Offline != nil && !atMember {
			m := OfflineMessage{Addressee: d.Target, Sender: req.From().Address.User, Display: req.From().DisplayName,
				ContentType: contentTypeOf(req), Body: append([]byte(nil), req.Body()...), Received: time.Now()}
			if set.cfg.Offline(m) == nil {
				respondWarn(set, tx, req, 202, "Accepted") // kept: delivered when a phone registers
				return
			}
		}
		respondWarn(set, tx, req, 480, "Temporarily Unavailable")
		return
	}
	var code int
	m := outMessage{sender: req.From().Address.User, display: req.From().DisplayName, ctype: contentTypeOf(req), body: req.Body(), maxFwd: 69}
	if h := req.MaxForwards(); h != nil && h.Val() > 0 {
		m.maxFwd = int(h.Val()) - 1
	}
	if d.Route == dialplan.RouteHQ {
		code = b.deliverInTurn(ctx, set, m, ts)
	} else {
		code = b.deliver(ctx, cancel, set, m, ts)
	}
	respondWarn(set, tx, req, code, reasonPhrase(code))
}

// OfflineMessage is an instant message kept for a local user with no
// phone registered (Config.Offline), delivered by DeliverKept.
type OfflineMessage struct {
	ID          int64 // the store's
	Addressee   string
	Sender      string // the local user who sent it
	Display     string // the sender's display name
	ContentType string
	Body        []byte
	Received    time.Time
}

// DeliverKept sends a kept message to its addressee's registered
// contacts, as Message does, and returns the status: 2xx delivered, 480
// none registered.
func (b *B2BUA) DeliverKept(ctx context.Context, m OfflineMessage) int {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	set := b.current().Settings
	ctx, cancel := context.WithTimeout(ctx, messageTimeout)
	defer cancel()
	ts, err := b.targets(ctx, set, dialplan.Decision{Route: dialplan.RouteLocal, Target: m.Addressee})
	if ts = reachable(ts); err != nil || len(ts) == 0 {
		return 480
	}
	return b.deliver(ctx, cancel, set, outMessage{sender: m.Sender, display: m.Display, ctype: m.ContentType, body: m.Body, maxFwd: 69}, ts)
}

// outMessage is what a MESSAGE the box sends carries.
type outMessage struct {
	sender, display, ctype string
	body                   []byte
	maxFwd                 int
}

// deliver sends req's message to every target at once and returns the
// status for the sender: the first 2xx, else the best failure.
func (b *B2BUA) deliver(ctx context.Context, cancel context.CancelFunc, set *Settings, in outMessage, ts []target) int {
	codes := make(chan int, len(ts))
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Go(func() {
			res, err := b.client.Do(ctx, messageTo(set, in, t))
			switch {
			case err != nil:
				codes <- 408
			default:
				codes <- res.StatusCode
			}
		})
	}
	best := 0
	for range ts {
		c := <-codes
		if c/100 == 2 {
			cancel() // the others are abandoned: the message is delivered
			wg.Wait()
			return c
		}
		if c/100 == 3 {
			c = 480 // no redirect is followed for a message
		}
		if best == 0 || rank(c) > rank(best) {
			best = c
		}
	}
	wg.Wait()
	return best
}

// deliverInTurn sends req's message to the targets in order (HQ's),
// going on after a retryable failure, and returns the sender's status.
func (b *B2BUA) deliverInTurn(ctx context.Context, set *Settings, in outMessage, ts []target) int {
	code := 408
	for _, t := range ts {
		res, err := b.client.Do(ctx, messageTo(set, in, t))
		code = 408
		if err == nil {
			code = res.StatusCode
		}
		if code/100 == 2 || !t.retryable(code, err) || ctx.Err() != nil {
			break
		}
	}
	if code/100 == 3 {
		code = 480 // no redirect is followed for a message
	}
	return code
}

// messageTo is the MESSAGE to t carrying m: the sender's user in From,
// the addressee in To.
func messageTo(set *Settings, m outMessage, t target) *sip.Request {
	req := sip.NewRequest(sip.MESSAGE, t.uri)
	req.SetTransport(t.transport)
	if t.dest != "" {
		req.SetDestination(t.dest)
	}
	laddr := t.laddr
	if laddr == nil {
		laddr = set.laddr
	}
	setLaddr(req, t.transport, laddr)
	host := t.uri.Host
	if laddr != nil {
		host = laddr.IP.String()
	}
	from := &sip.FromHeader{DisplayName: m.display, Address: sip.Uri{Scheme: "sip", User: m.sender, Host: host}}
	from.Params.Add("tag", sip.GenerateTagN(16))
	callID := sip.CallIDHeader(sip.GenerateTagN(32))
	mf := sip.MaxForwardsHeader(m.maxFwd)
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: t.user, Host: t.uri.Host}})
	req.AppendHeader(&callID)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: 1, MethodName: sip.MESSAGE})
	req.AppendHeader(&mf)
	ct := sip.ContentTypeHeader(m.ctype)
	req.AppendHeader(&ct)
	req.SetBody(append([]byte(nil), m.body...))
	return req
}

// reachable drops the contacts whose outbound flow is gone (nothing can
// reach them) and the other registrar pool members (a message is not
// signed as a member's INVITE is, so a member would challenge it).
func reachable(ts []target) []target {
	out := ts[:0]
	for _, t := range ts {
		if !t.flowFailed && !t.signed {
			out = append(out, t)
		}
	}
	return out
}

// messageRate is a token bucket per sender (golang.org/x/time/rate, read
// on now so tests step time).
type messageRate struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]*rate.Limiter
}

func (r *messageRate) allow(sender string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.m[sender]
	if l == nil {
		if len(r.m) >= maxSenders {
			clear(r.m) // each sender then gets at most another burst
		}
		l = rate.NewLimiter(messageRefill, messageBurst)
		r.m[sender] = l
	}
	return l.AllowN(r.now(), 1)
}
