package b2bua

import (
	"slices"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// Call park: a party of an answered call blind-transfers the other
// (REFER, RFC 3515) to the park code (parkCode: the first free orbit) or
// to an orbit of Config.Park. The call stays on the box with the parked
// party alone, hearing music on hold (an Anchor that is a HoldAnchor),
// and the parker gets NOTIFY 200 and a BYE. Dialling the orbit from any
// local phone retrieves it: the retriever takes the parker's place in
// the same call (the parked party is re-INVITEd with the retriever's
// session through the anchor). Nobody retrieving it within
// Park.Timeout, the call rings the parker's extension (a blind transfer
// of the parked party to it), then Park.Overflow, else the parked party
// is hung up. A busy lamp on an orbit shows it confirmed while a call is
// parked there. Not done: retrieving with an INVITE without an offer
// (488), a retrieval during the ring-back (the orbit is free by then:
// 404), and the parker hearing which orbit *85 took (it can watch the
// orbits' lamps).

// parkCode parks a call on the first free orbit.
const parkCode = "*85"

// defaultParkTimeout is Park.Timeout's default.
const defaultParkTimeout = 60 * time.Second

// Park is call park (park.go).
type Park struct {
	// Orbits are the orbit extensions, in the order parkCode takes them.
	Orbits []string
	// Timeout is how long a call waits parked before it rings the
	// parker; 0 = 60 s.
	Timeout time.Duration
	// Overflow is dialled (as the parker would) when the parker does not
	// answer the ring-back; "" = the parked party is hung up.
	Overflow string
}

// parkLot holds the parked calls by orbit.
type parkLot struct {
	mu     sync.Mutex
	orbits map[string]*parkedCall
}

// parkedCall is a call waiting in an orbit.
type parkedCall struct {
	orbit  string
	c      *call
	y      *party // the parked party
	parker *party // who parked it (gone)
	timer  *time.Timer
	// retrieving: a retrieval runs; the orbit stays taken until it
	// succeeds (retrieved) or fails (putBack). Under parkLot.mu.
	retrieving bool
}

// parkTarget reads a park number: an orbit, or "" for parkCode; ok is
// false for any other number, or when park is off.
func (s *Settings) parkTarget(number string) (orbit string, ok bool) {
	p := s.cfg.Park
	switch {
	case p == nil:
		return "", false
	case number == parkCode:
		return "", true
	case slices.Contains(p.Orbits, number):
		return number, true
	}
	return "", false
}

// park puts y, the other party of x's REFER in c, in orbit ("" = the
// first free one) and returns the status for the NOTIFY: 486 when the
// orbit (or every orbit) is taken. parked finishes it once x was told.
func (c *call) park(x, y *party, orbit string) (*parkedCall, int) {
	if !x.trusted {
		return nil, 403
	}
	lot := &c.b.parks
	lot.mu.Lock()
	defer lot.mu.Unlock()
	if lot.orbits == nil {
		lot.orbits = map[string]*parkedCall{}
	}
	if orbit == "" {
		for _, o := range c.set.cfg.Park.Orbits {
			if lot.orbits[o] == nil {
				orbit = o
				break
			}
		}
	}
	if orbit == "" || lot.orbits[orbit] != nil {
		return nil, 486
	}
	pk := &parkedCall{orbit: orbit, c: c, y: y, parker: x}
	lot.orbits[orbit] = pk
	c.mu.Lock()
	c.orbit = orbit
	c.mu.Unlock()
	return pk, 200
}

// parked finishes a park once the parker got its NOTIFY: the parker's
// leg xl leaves the call (BYE), the anchor holds for it, and the
// ring-back is armed.
func (pk *parkedCall) parked(xl Leg) {
	c := pk.c
	b := c.b
	if h, ok := c.media().(HoldAnchor); ok {
		h.HoldFor(xl, true)
	}
	c.mu.Lock()
	c.parties[xl] = nil
	was := []string{c.info.From, c.info.Target}
	c.info.From, c.info.To, c.info.Target, c.info.State = pk.y.user, pk.orbit, pk.orbit, StateParked
	c.mu.Unlock()
	pk.parker.bye() // c.xfer still names it: its own BYE leaves the call alone
	c.mu.Lock()
	c.xfer = nil
	c.mu.Unlock()
	timeout := c.set.cfg.Park.Timeout
	if timeout <= 0 {
		timeout = defaultParkTimeout
	}
	b.parks.mu.Lock()
	if b.parks.orbits[pk.orbit] == pk {
		pk.timer = time.AfterFunc(timeout, pk.ringBack)
	}
	b.parks.mu.Unlock()
	b.log.Info("b2bua: call parked", "call", c.info.ID, "orbit", pk.orbit, "by", pk.parker.user)
	b.watchedChanged(append(was, pk.orbit)...)
}

// take claims the call parked in orbit for a retrieval, which ends with
// retrieved or putBack; nil when there is none, its ring-back began, or
// another retrieval runs.
func (l *parkLot) take(orbit string) *parkedCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	pk := l.orbits[orbit]
	if pk == nil || pk.retrieving {
		return nil
	}
	pk.retrieving = true
	if pk.timer != nil {
		pk.timer.Stop()
	}
	return pk
}

// retrieved frees pk's orbit once its retriever has the call.
func (l *parkLot) retrieved(pk *parkedCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.orbits[pk.orbit] == pk {
		delete(l.orbits, pk.orbit)
	}
}

// claim removes pk from its orbit for its ring-back; false when it is
// no longer there (retrieved, or hung up).
func (l *parkLot) claim(pk *parkedCall) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.orbits[pk.orbit] != pk || pk.retrieving {
		return false
	}
	delete(l.orbits, pk.orbit)
	return true
}

// putBack leaves a call whose retrieval failed in its orbit, on hold,
// with a new ring-back timer.
func (pk *parkedCall) putBack(rl Leg) {
	c := pk.c
	if h, ok := c.media().(HoldAnchor); ok {
		h.HoldFor(rl, true)
	}
	lot := &c.b.parks
	lot.mu.Lock()
	defer lot.mu.Unlock()
	pk.retrieving = false
	if lot.orbits[pk.orbit] != pk {
		return // it ended meanwhile (leave)
	}
	timeout := c.set.cfg.Park.Timeout
	if timeout <= 0 {
		timeout = defaultParkTimeout
	}
	pk.timer = time.AfterFunc(timeout, pk.ringBack)
}

// leave forgets c's orbit when c ends (the parked party hung up).
func (l *parkLot) leave(c *call, orbit string) {
	if orbit == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if pk := l.orbits[orbit]; pk != nil && pk.c == c {
		delete(l.orbits, orbit)
		if pk.timer != nil {
			pk.timer.Stop()
		}
	}
}

// ringBack runs when nobody retrieved the call in time: the parked party
// is blind-transferred to the parker's extension, then to the overflow;
// failing both, it is hung up.
func (pk *parkedCall) ringBack() {
	c := pk.c
	b := c.b
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	if !b.parks.claim(pk) {
		return // retrieved meanwhile
	}
	b.watchedChanged(pk.orbit)
	b.log.Info("b2bua: parked call not retrieved: ringing the parker", "call", c.info.ID, "orbit", pk.orbit, "parker", pk.parker.user)
	code := c.blindRing(nil, pk.y, sip.Uri{User: pk.parker.user}, nil, 0)
	if code >= 300 && c.set.cfg.Park.Overflow != "" && c.life.Err() == nil {
		code = c.blindRing(nil, pk.y, sip.Uri{User: c.set.cfg.Park.Overflow}, nil, 0)
	}
	if code >= 200 && code < 300 {
		c.end(Transferred, BySystem)
		return
	}
	c.end(NoAnswer, BySystem)
}

// retrieve answers an INVITE from a local user to an orbit: the caller
// takes the parker's place in the parked call.
func (b *B2BUA) retrieve(set *Settings, x *sipgo.DialogServerSession, req *sip.Request, local callLocal, caller, orbit string) {
	offer := req.Body()
	var pk *parkedCall
	if orbit != "" {
		pk = b.parks.take(orbit)
	}
	switch {
	case pk == nil:
		_ = x.Respond(404, "Nothing Parked", nil, set.warnings()...)
		return
	case len(offer) == 0 || !isSDP(contentTypeOf(req)):
		pk.putBack(pk.y.legOf().other())
		_ = x.Respond(488, "Not Acceptable Here", nil, append(set.warnings(), acceptSDP)...)
		return
	}
	c, y := pk.c, pk.y
	yl := y.legOf()
	rl := yl.other()
	an := c.media()
	forY := offer
	if an != nil {
		if h, ok := an.(HoldAnchor); ok {
			h.HoldFor(rl, false)
		}
		var err error
		if forY, err = an.Offer(rl, offer); err != nil {
			b.log.Info("b2bua: retrieval's media refused", "call", c.info.ID, "err", err)
			pk.putBack(rl)
			_ = x.Respond(488, "Not Acceptable Here", nil, set.warnings()...)
			return
		}
	}
	ansY, code, err := y.reoffer(c.life, forY, contentTypeOf(req))
	if err == nil && an != nil {
		if ansY, err = an.Answer(yl, ansY); err != nil {
			code = 488
		}
	}
	if err != nil {
		b.log.Info("b2bua: parked call not retrieved", "call", c.info.ID, "orbit", orbit, "status", code, "err", err)
		if an != nil {
			an.Reject(rl)
		}
		pk.putBack(rl)
		_ = x.Respond(480, "Temporarily Unavailable", nil, set.warnings()...)
		return
	}
	pr := newCallerParty(b, c, req, x, local.arrived, local.contact)
	pr.trusted = true
	pr.noteIn(offer, contentTypeOf(req))
	forR := pr.outSDP(ansY)
	b.parks.retrieved(pk) // not under c.mu: park takes the lot's lock, then the call's
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		_ = x.Respond(480, "Temporarily Unavailable", nil, set.warnings()...)
		return
	}
	pr.attachLocked(c, rl)
	c.parties[rl] = pr
	c.orbit = ""
	c.info.Target, c.info.State = caller, StateAnswered
	c.cdr.Target, c.cdr.Peer = caller, pr.name
	c.mu.Unlock()
	b.register(pr)
	ct := sip.ContentTypeHeader("application/sdp")
	if err := x.Respond(200, "OK", forR, append(set.warnings(), &ct)...); err != nil {
		b.log.Info("b2bua: retrieval not answered", "call", c.info.ID, "err", err)
		pr.confirm()
		c.end(Failed, BySystem)
		return
	}
	pr.startSession()
	b.log.Info("b2bua: parked call retrieved", "call", c.info.ID, "orbit", orbit, "by", caller)
	b.watchedChanged(orbit, caller)
}
