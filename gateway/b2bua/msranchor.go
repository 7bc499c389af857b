package b2bua

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/media/sdprewrite"
)

// RemoteMSR is a media resource of another box's MSR, chosen by the
// MediaFunc for a bridge (RemoteAnchor).
type RemoteMSR struct {
	Name string // the MSR's name, for logs
	// URI is the Contact its UA registered (sip:{iface};{contact-id}@host:port):
	// an INVITE there opens a media connection on that interface.
	URI string
	// Control joins two of its connections (RFC 6230 msc-mixer/1.0 join
	// on its control channel); media/mscclient's Conn satisfies it.
	Control MediaControl
}

// MediaControl drives a remote MSR's control channel.
type MediaControl interface {
	Join(ctx context.Context, id1, id2 string) error
}

// msrSetupTimeout bounds the set-up of the media on a remote MSR (two
// INVITEs and a join); past it the call falls back to its own relay.
const msrSetupTimeout = 4 * time.Second

// RemoteAnchor returns an Anchor that anchors a bridge's media on m, a
// media resource of another box. The first offer (from either leg) opens
// one media connection per leg on the MSR: an INVITE with that offer for
// the offering leg, an INVITE with the same description made inactive for
// the other leg (the MSR refuses INVITEs without an offer, and inactive
// keeps it from sending anywhere before that leg answers), then a join of
// the two connection ids on m.Control. The other leg is offered the MSR's
// address and codecs for its connection; its answer re-INVITEs that
// connection, and the offering leg gets the MSR's answer. Later offers
// re-INVITE the offering leg's connection the same way. Both MSR dialogs
// get a BYE at Close.
//
// When the set-up at the first offer fails (no answer, an error
// response, the join refused or the control channel down), whatever was
// opened is released, onFallback is told why, and fallback's Anchor (the
// box's own relay) takes the bridge over for good. A failure after that
// (a re-INVITE of an MSR connection refused) refuses that offer/answer
// exchange, as the relay would. A BYE from the MSR on either connection
// (its media inactivity timeout, a restart) calls onDead, like the
// relay's inactivity: the call ends.
func (b *B2BUA) RemoteAnchor(callID string, m RemoteMSR, fallback func() (Anchor, error), onFallback func(error), onDead func(reason string)) Anchor {
	return &msrAnchor{b: b, callID: callID, m: m, fallback: fallback, onFallback: onFallback, onDead: onDead}
}

// msrAnchor is the Anchor of a bridge anchored on a remote MSR.
type msrAnchor struct {
	b          *B2BUA
	callID     string
	m          RemoteMSR
	fallback   func() (Anchor, error)
	onFallback func(error)
	onDead     func(reason string)

	mu      sync.Mutex
	inner   Anchor // the fallback, once taken
	conn    [2]*msrConn
	pending [2][]byte // the MSR's answer to the last offer from each leg
	closed  bool
}

// msrConn is one media connection on the MSR: our dialog with its UA,
// the MSR's latest description for it, and what we last sent the leg.
type msrConn struct {
	p       *party
	id      string // RFC 6230 connection id: local-tag:remote-tag
	msrSDP  *sdprewrite.SDP
	origin  sdprewrite.Origin // o= of what the leg receives
	lastOut string            // last body sent to the leg, o= aside
	// lastIn is the leg's last description given to the MSR, lastAns
	// the MSR's answer to it.
	lastIn, lastAns []byte
}

func (a *msrAnchor) Offer(from Leg, sdp []byte) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inner != nil {
		return a.inner.Offer(from, sdp)
	}
	if a.closed {
		return nil, errors.New("b2bua: media anchor closed")
	}
	offer, err := sdprewrite.Parse(sdp)
	if err != nil {
		return nil, fmt.Errorf("b2bua: offer from leg %v: %w", from, err)
	}
	to := from.other()
	if a.conn[from] == nil {
		if err := a.setup(from, sdp, offer); err != nil {
			// Debug: onFallback logs it, rate-limited (one per call otherwise).
			a.b.log.Debug("b2bua: media on remote MSR failed, using the local relay", "call", a.callID, "msr", a.m.Name, "err", err)
			if a.onFallback != nil {
				a.onFallback(err)
			}
			inner, ferr := a.fallback()
			if ferr != nil {
				return nil, ferr
			}
			if inner == nil {
				return nil, fmt.Errorf("b2bua: media on remote MSR %s: %w", a.m.Name, err)
			}
			a.inner = inner
			return inner.Offer(from, sdp)
		}
	} else {
		ans, err := a.update(from, sdp)
		if err != nil {
			return nil, err
		}
		a.pending[from] = ans
	}
	return a.conn[to].out(sdpDirection(offer.Audio)), nil
}

func (a *msrAnchor) Answer(from Leg, sdp []byte) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inner != nil {
		return a.inner.Answer(from, sdp)
	}
	to := from.other()
	if a.conn[from] == nil || a.pending[to] == nil {
		return nil, fmt.Errorf("b2bua: answer from leg %v without an offer", from)
	}
	// The leg's answer is the MSR connection's new remote side: an offer
	// to the MSR in a re-INVITE (its answer changes nothing we send).
	if _, err := a.update(from, sdp); err != nil {
		return nil, err
	}
	// Kept: an early answer (18x) is repeated in the 2xx.
	ans := a.pending[to]
	s, err := sdprewrite.Parse(ans)
	if err != nil {
		return nil, fmt.Errorf("b2bua: MSR %s answer: %w", a.m.Name, err)
	}
	a.conn[to].msrSDP = s
	return a.conn[to].out(s.Audio.Direction), nil
}

// Reject: a refused offer. The MSR connection of the offering leg already
// has the refused description (as with the relay, the next exchange sets
// the state).
func (a *msrAnchor) Reject(from Leg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inner != nil {
		a.inner.Reject(from)
		return
	}
	a.pending[from] = nil
}

func (a *msrAnchor) Close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	inner, conns := a.inner, a.conn
	a.conn = [2]*msrConn{}
	a.mu.Unlock()
	if inner != nil {
		inner.Close()
	}
	a.release(conns[:]...)
}

// release ends MSR dialogs (their ports are freed by the MSR).
func (a *msrAnchor) release(cs ...*msrConn) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Go(c.p.bye)
		}
	}
	wg.Wait()
}

// setup opens the two connections for a first offer from leg from and
// joins them. On error nothing stays open.
func (a *msrAnchor) setup(from Leg, sdp []byte, offer *sdprewrite.SDP) error {
	ctx, cancel := context.WithTimeout(context.Background(), msrSetupTimeout)
	defer cancel()
	cf, ans, err := a.open(ctx, sdp)
	if err != nil {
		return err
	}
	// The other leg's connection, until that leg answers: the same
	// codecs, inactive.
	inactive := offer.Rewrite(sdprewrite.Params{Origin: offer.Origin, Addr: offer.Audio.Addr, Port: offer.Audio.Port,
		Codecs: offer.Audio.Codecs, Direction: sdprewrite.Inactive})
	if !offer.Audio.Addr.IsValid() {
		inactive = offer.Rewrite(sdprewrite.Params{Origin: offer.Origin, Addr: netip.IPv4Unspecified(), Port: offer.Audio.Port,
			Codecs: offer.Audio.Codecs, Direction: sdprewrite.Inactive})
	}
	ct, ansT, err := a.open(ctx, inactive)
	if err != nil {
		a.release(cf)
		return err
	}
	if err := a.m.Control.Join(ctx, cf.id, ct.id); err != nil {
		a.release(cf, ct)
		return err
	}
	if cf.msrSDP, err = sdprewrite.Parse(ans); err == nil {
		ct.msrSDP, err = sdprewrite.Parse(ansT)
	}
	if err != nil {
		a.release(cf, ct)
		return fmt.Errorf("MSR answer: %w", err)
	}
	a.conn[from], a.conn[from.other()] = cf, ct
	a.pending[from] = ans
	a.b.log.Info("b2bua: media anchored on remote MSR", "call", a.callID, "msr", a.m.Name, "uri", a.m.URI,
		"conn_"+strings.ToLower(from.String()), cf.id, "conn_"+strings.ToLower(from.other().String()), ct.id)
	return nil
}

// update re-INVITEs leg l's connection with sdp and returns the MSR's
// answer.
func (a *msrAnchor) update(l Leg, sdp []byte) ([]byte, error) {
	c := a.conn[l]
	if c.lastIn != nil && bytes.Equal(c.lastIn, sdp) && c.lastAns != nil {
		return c.lastAns, nil // a repeat (18x then 2xx, a refresh): nothing changes
	}
	ctx, cancel := context.WithTimeout(context.Background(), msrSetupTimeout)
	defer cancel()
	ans, code, err := c.p.reoffer(ctx, sdp, "application/sdp")
	if err != nil {
		return nil, fmt.Errorf("b2bua: re-INVITE of MSR %s connection %s (%d): %w", a.m.Name, c.id, code, err)
	}
	c.lastIn, c.lastAns = bytes.Clone(sdp), ans
	return ans, nil
}

// open sends an INVITE with offer to the MSR UA and returns the
// confirmed dialog (ACKed) and the MSR's answer.
func (a *msrAnchor) open(ctx context.Context, offer []byte) (*msrConn, []byte, error) {
	var uri sip.Uri
	if err := sip.ParseUri(a.m.URI, &uri); err != nil || uri.Host == "" {
		return nil, nil, fmt.Errorf("MSR contact %q: %w", a.m.URI, cmpErr(err))
	}
	port := uri.Port
	if port == 0 {
		port = 5060
	}
	dest := uri.Host + ":" + strconv.Itoa(port)
	set := a.b.current().Settings
	laddr := set.laddr
	if f := set.cfg.LocalFor; f != nil {
		if l := f(dest); l != nil {
			laddr = l
		}
	}
	if laddr == nil {
		return nil, nil, errors.New("no local SIP listener towards the MSR")
	}
	t := target{uri: uri, user: uri.User, transport: "UDP", dest: dest, laddr: laddr}
	contact := t.contactAt(laddr)
	req := sip.NewRequest(sip.INVITE, uri)
	req.SetTransport("UDP")
	req.SetDestination(dest)
	setLaddr(req, "UDP", laddr)
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "outpost", Host: contact.Host}}
	from.Params.Add("tag", sip.GenerateTagN(16))
	callID := sip.CallIDHeader(sip.GenerateTagN(32))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: uri.User, Host: uri.Host}})
	req.AppendHeader(&callID)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: 1, MethodName: sip.INVITE})
	req.AppendHeader(&sip.ContactHeader{Address: contact})
	req.AppendHeader(sip.NewHeader("Allow", allowInDialog))
	ct := sip.ContentTypeHeader("application/sdp")
	req.AppendHeader(&ct)
	req.SetBody(offer)
	dua := &sipgo.DialogUA{Client: a.b.client, ContactHDR: sip.ContactHeader{Address: contact}}
	sess, err := dua.WriteInvite(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("INVITE to MSR %s: %w", a.m.URI, err)
	}
	// Past ctx's deadline: CANCEL after a provisional response; with
	// none (RFC 3261 §9.1 forbids a CANCEL then) stop waiting at once
	// rather than for Timer B (sipgo's WaitAnswerForceCancelErr).
	var responded atomic.Bool
	wctx, wcancel := context.WithCancelCause(context.Background())
	defer wcancel(nil)
	stop := context.AfterFunc(ctx, func() {
		if responded.Load() {
			wcancel(context.Cause(ctx))
		} else {
			wcancel(sipgo.WaitAnswerForceCancelErr)
		}
	})
	defer stop()
	err = sess.WaitAnswer(wctx, sipgo.AnswerOptions{OnResponse: func(*sip.Response) error {
		responded.Store(true)
		return nil
	}})
	if err != nil {
		if sess.InviteResponse != nil && sess.InviteResponse.IsSuccess() {
			l := &leg{t: t, sess: sess}
			discardLeg(a.b, l, laddr)
		}
		return nil, nil, fmt.Errorf("INVITE to MSR %s: %w", a.m.URI, err)
	}
	l := &leg{t: t, sess: sess}
	p := newCalleeParty(a.b, loneHome(a.b), l, laddr, contact)
	p.name = "msr:" + a.m.URI
	if err := a.b.ackLeg(ctx, sess); err != nil {
		a.b.log.Debug("b2bua: ack to MSR", "msr", a.m.URI, "err", err)
	}
	p.confirm()
	p.outSDP(offer)
	// Registered: the MSR's in-dialog OPTIONS and BYE get answers, and
	// its BYE means the call's media is gone.
	if a.onDead != nil {
		p.onBye = func() { a.onDead("MSR " + a.m.Name + " ended a media connection") }
	}
	a.b.register(p)
	localTag, _ := p.local.Params.Get("tag")
	remoteTag, _ := p.remote.Params.Get("tag")
	ans := sess.InviteResponse.Body()
	return &msrConn{p: p, id: remoteTag + ":" + localTag, origin: newOrigin(), lastIn: bytes.Clone(offer), lastAns: ans}, ans, nil
}

func cmpErr(err error) error {
	if err == nil {
		return errors.New("no host")
	}
	return err
}

// out is the description the connection's leg receives: the MSR's
// address, port and codecs for it, direction dir, under our own o= line
// (its version raised on each change, RFC 3264 §8).
func (c *msrConn) out(dir sdprewrite.Direction) []byte {
	s := c.msrSDP
	p := sdprewrite.Params{Origin: c.origin, Addr: s.Audio.Addr, Port: s.Audio.Port, Codecs: s.Audio.Codecs,
		Direction: dir, Proto: "RTP/AVP"}
	body := s.Rewrite(p)
	p.Origin.Version = 0
	key := string(s.Rewrite(p))
	if c.lastOut != "" && key != c.lastOut {
		c.origin.Version++
		p.Origin = c.origin
		body = s.Rewrite(p)
	}
	c.lastOut = key
	return body
}

// sdpDirection is a description's direction, with RFC 2543 hold (c=0.0.0.0:
// the author receives nothing) taken into account.
func sdpDirection(m sdprewrite.Media) sdprewrite.Direction {
	if m.Hold {
		return sdprewrite.Make(m.Direction.Sends(), false)
	}
	return m.Direction
}

func newOrigin() sdprewrite.Origin {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := binary.BigEndian.Uint64(b[:]) >> 1
	return sdprewrite.Origin{Username: "outpost", SessID: strconv.FormatUint(id, 10), Version: 1}
}
