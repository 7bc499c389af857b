package b2bua

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/media/sdprewrite"
)

// Call pickup: a local user answers, from its own phone, a call that
// rings another local user: directed (directedPickupCode then the
// extension) or within the pickup groups the user is in
// (groupPickupCode: the oldest call ringing a member of one of them).
//
// The picker's INVITE takes the place of the ringing call's B legs: they
// are cancelled, and the picker's offer is turned into the answer to
// the caller's offer (its first codec the caller's offer has, with the
// picker's payload numbers), while the picker is answered with the
// caller's offer (as the box sent it to the B legs) cut to that codec.
// Both sides have offered, so this is the one exchange that settles
// both. A hunt group's call is picked up as ringing each member it rings
// at the time. Not done: a caller whose INVITE had no offer, and SRTP on
// the picker's side (the box's own keys toward it): both refuse the
// pickup with 488; the call keeps ringing.

const (
	directedPickupCode = "**"
	groupPickupCode    = "*8"
)

var errPickedUp = errors.New("b2bua: picked up from another phone")

// pickup is a picker's claim on a ringing call: its INVITE, and the
// answer it gets once the call is bridged (nil body with a status on
// failure).
type pickup struct {
	x      *sipgo.DialogServerSession
	req    *sip.Request
	local  callLocal
	picker string
	result chan pickupResult
}

type pickupResult struct {
	status int // 0: answer x with body
	body   []byte
	ok     chan bool // whether x confirmed its 200
}

// pickupTarget reads a pickup code: the users whose ringing calls the
// caller may take (nil when number is no pickup code).
func (s *Settings) pickupTarget(caller, number string) ([]string, bool) {
	if number == groupPickupCode {
		var out []string
		for _, g := range s.cfg.PickupGroups {
			if slices.Contains(g, caller) {
				for _, m := range g {
					if m != caller && !slices.Contains(out, m) {
						out = append(out, m)
					}
				}
			}
		}
		return out, true
	}
	if ext, ok := strings.CutPrefix(number, directedPickupCode); ok && ext != "" {
		return []string{ext}, true
	}
	return nil, false
}

// ringingFor is the oldest call ringing one of users (not from caller).
func (b *B2BUA) ringingFor(users []string, caller string) *call {
	b.mu.Lock()
	calls := make([]*call, 0, len(b.calls))
	for _, c := range b.calls {
		calls = append(calls, c)
	}
	b.mu.Unlock()
	var best *call
	var since time.Time
	for _, c := range calls {
		c.mu.Lock()
		rings := slices.Contains(users, c.info.Target) || slices.ContainsFunc(c.rung, func(m string) bool { return slices.Contains(users, m) })
		ok := c.initial && c.info.State == StateRinging && c.info.Route == dialplan.RouteLocal &&
			rings && c.info.From != caller && c.pick == nil && !c.ended
		at := c.info.Started
		c.mu.Unlock()
		if ok && (best == nil || at.Before(since)) {
			best, since = c, at
		}
	}
	return best
}

// servePickup handles a pickup code dialled by x's caller: it claims
// the ringing call, waits for it to be bridged, and answers x.
func (b *B2BUA) servePickup(set *Settings, x *sipgo.DialogServerSession, req *sip.Request, local callLocal, caller string, users []string) {
	c := b.ringingFor(users, caller)
	if c == nil {
		_ = x.Respond(404, "Nothing To Pick Up", nil, set.warnings()...)
		return
	}
	p := &pickup{x: x, req: x.InviteRequest, local: local, picker: caller, result: make(chan pickupResult, 1)}
	c.mu.Lock()
	if c.pick != nil || c.ended || c.info.State != StateRinging {
		c.mu.Unlock()
		_ = x.Respond(404, "Nothing To Pick Up", nil, set.warnings()...)
		return
	}
	c.pick = p
	c.mu.Unlock()
	c.abort(errPickedUp)
	var r pickupResult
	select {
	case r = <-p.result:
	case <-time.After(byeTimeout):
		r.status = 480
	}
	if r.status != 0 {
		_ = x.Respond(r.status, "", nil, set.warnings()...)
		return
	}
	ct := sip.ContentTypeHeader("application/sdp")
	err := x.Respond(200, "OK", r.body, append(set.warnings(), &ct)...)
	r.ok <- err == nil
}

// answerPickup bridges the caller with the picker after the B legs were
// cancelled for it. It reports whether the caller got its final answer.
func (c *call) answerPickup() bool {
	c.mu.Lock()
	p := c.pick
	c.mu.Unlock()
	if p == nil {
		return false
	}
	offer := c.setup.offer
	toA, toX, ok := pickupSDP(offer, p.req.Body())
	if !ok {
		p.result <- pickupResult{status: 488}
		c.respondA(480, "Temporarily Unavailable")
		c.end(Failed, BySystem)
		return true
	}
	if an := c.media(); an != nil {
		out, err := an.Answer(LegB, toA)
		if err != nil {
			c.b.log.Info("b2bua: pickup not bridged", "call", c.info.ID, "err", err)
			p.result <- pickupResult{status: 488}
			c.respondA(480, "Temporarily Unavailable")
			c.end(Failed, BySystem)
			return true
		}
		toA = out
	}
	pa := newCallerParty(c.b, c, c.setup.aReq, c.setup.a, c.local.arrived, c.local.contact)
	px := newCallerParty(c.b, c, p.req, p.x, p.local.arrived, p.local.contact)
	pa.trusted, px.trusted = c.trusted, true
	pa.noteIn(c.setup.aReq.Body(), contentTypeOf(c.setup.aReq))
	px.noteIn(p.req.Body(), contentTypeOf(p.req))
	toX = px.outSDP(toX)
	toA = pa.outSDP(toA)
	pa.attach(c, LegA)
	px.attach(c, LegB)
	c.mu.Lock()
	c.parties = [2]*party{pa, px}
	c.setup.users = 2 // this answer, and the caller's ACK (onAck)
	c.cdr.Answer, c.cdr.Status = time.Now(), 200
	c.cdr.Target, c.cdr.PickedUpBy = p.picker, p.picker
	rang := c.info.Target
	c.info.Target = p.picker
	c.cdr.Disposition = Answered
	c.mu.Unlock()
	c.b.register(pa, px)
	c.setState(StateAnswered)
	c.b.watchedChanged(rang)

	okX := make(chan bool, 1)
	p.result <- pickupResult{body: toX, ok: okX}
	ct := sip.ContentTypeHeader("application/sdp")
	hdrs := append(c.set.warnings(), &ct)
	if err := c.setup.a.Respond(200, "OK", toA, hdrs...); err != nil || !<-okX {
		c.b.log.Info("b2bua: pickup not confirmed", "call", c.info.ID, "err", err)
		pa.confirm()
		px.confirm()
		c.end(Failed, BySystem)
		return true
	}
	c.setupDone()
	c.mu.Lock()
	c.confirmed = true
	ended := c.ended
	c.mu.Unlock()
	c.b.log.Info("b2bua: call picked up", "call", c.info.ID, "for", c.d.Target, "by", p.picker)
	if !ended && c.set.cfg.KeepAlive > 0 {
		c.startKeepalive()
	}
	return true
}

// pickupSDP turns the picker's offer x into the answer to the caller's
// offer a (toA), and a into the answer to x (toX): the first codec of
// x's that a offers too, with x's payload numbers, and
// telephone-event when both have it. ok is false without a common
// codec, when either offer is missing or SRTP.
func pickupSDP(a, x []byte) (toA, toX []byte, ok bool) {
	sa, err1 := sdprewrite.Parse(a)
	sx, err2 := sdprewrite.Parse(x)
	if err1 != nil || err2 != nil || sdprewrite.IsSecure(sa.Audio.Proto) || sdprewrite.IsSecure(sx.Audio.Proto) {
		return nil, nil, false
	}
	var codec, te *sdprewrite.Codec
	for i, c := range sx.Audio.Codecs {
		if _, found := sdprewrite.Find(sa.Audio.Codecs, c.Name); !found || c.Name == "" {
			continue
		}
		if c.Is("telephone-event") {
			if te == nil {
				te = &sx.Audio.Codecs[i]
			}
		} else if codec == nil {
			codec = &sx.Audio.Codecs[i]
		}
	}
	if codec == nil {
		return nil, nil, false
	}
	cs := []sdprewrite.Codec{*codec}
	if te != nil {
		cs = append(cs, *te)
	}
	return answerSDP(sx, cs), answerSDP(sa, cs), true
}

// answerSDP is a minimal session description at s's audio address with
// codecs, sendrecv.
func answerSDP(s *sdprewrite.SDP, codecs []sdprewrite.Codec) []byte {
	m := s.Audio
	ip := "IP4"
	if m.Addr.Is6() {
		ip = "IP6"
	}
	id := strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	lines := []string{"v=0", "o=outpost " + id + " " + id + " IN " + ip + " " + m.Addr.String(), "s=-",
		"c=IN " + ip + " " + m.Addr.String(), "t=0 0"}
	pts := make([]string, len(codecs))
	for i, c := range codecs {
		pts[i] = strconv.Itoa(int(c.PT))
	}
	lines = append(lines, "m=audio "+strconv.Itoa(m.Port)+" RTP/AVP "+strings.Join(pts, " "))
	for _, c := range codecs {
		rate := c.Rate
		if rate == 0 {
			rate = 8000
		}
		lines = append(lines, "a=rtpmap:"+strconv.Itoa(int(c.PT))+" "+c.Name+"/"+strconv.Itoa(rate))
		if c.Fmtp != "" {
			lines = append(lines, "a=fmtp:"+strconv.Itoa(int(c.PT))+" "+c.Fmtp)
		}
	}
	if m.RTCPPort != 0 {
		lines = append(lines, "a=rtcp:"+strconv.Itoa(m.RTCPPort))
	}
	lines = append(lines, "a=sendrecv")
	return []byte(strings.Join(lines, "\r\n") + "\r\n")
}
