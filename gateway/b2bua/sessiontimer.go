package b2bua

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"
)

// RFC 4028 session timers, run per dialog: each party (leg) has its own
// interval and refresher, as a B2BUA terminates both dialogs. See doc.go.

const (
	// minSE is the box's Min-SE: the RFC 4028 §4 floor. A Session-Expires
	// below it gets 422.
	minSE = 90
	// defaultSessionExpires is Config.SessionExpires' default (RFC 4028
	// §4 recommends 1800 s).
	defaultSessionExpires = 1800
	// maxSessionExpires bounds what a peer may ask for (a day).
	maxSessionExpires = 86400
)

// sessionUnit is the length of one second of Session-Expires, in
// nanoseconds; 0 = time.Second. Tests shorten it (setSessionUnit) so that
// a session of 90 s, the RFC minimum the headers still say, runs in a
// fraction of a second; nothing else changes it.
var sessionUnit atomic.Int64

func sessionSeconds(n int) time.Duration {
	u := time.Duration(sessionUnit.Load())
	if u == 0 {
		u = time.Second
	}
	return time.Duration(n) * u
}

// sessionState is a party's session timer (guarded by its home's lock).
type sessionState struct {
	interval  int       // seconds; 0 = no session timer on this dialog
	weRefresh bool      // the box refreshes; otherwise the party does and the box watches
	update    bool      // the party accepts UPDATE: refreshes go without SDP
	last      time.Time // last refresh (either way)
	retryAt   time.Time // a refresh that could not run is tried again then
}

// sessionExpires reads a Session-Expires header ("x" compact): its
// delta-seconds and refresher parameter ("uac", "uas" or "").
func sessionExpires(m headered) (secs int, refresher string, ok bool) {
	h := headerNamed(m, "Session-Expires", "x")
	if h == nil {
		return 0, "", false
	}
	v, params, _ := strings.Cut(h.Value(), ";")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0, "", false
	}
	for p := range strings.SplitSeq(params, ";") {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(k), "refresher") {
			refresher = strings.ToLower(strings.TrimSpace(val))
		}
	}
	return min(n, maxSessionExpires), refresher, true
}

// minSEOf reads a request's Min-SE; 0 when absent or unreadable.
func minSEOf(m headered) int {
	h := headerNamed(m, "Min-SE")
	if h == nil {
		return 0
	}
	v, _, _ := strings.Cut(h.Value(), ";")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, maxSessionExpires)
}

// hasOption reports whether an option tag is listed in the named headers
// (Supported, Require; their compact forms "k" and none).
func hasOption(m headered, tag string, names ...string) bool {
	for _, h := range m.Headers() {
		if !nameIn(h.Name(), names) {
			continue
		}
		for t := range strings.SplitSeq(h.Value(), ",") {
			if strings.EqualFold(strings.TrimSpace(t), tag) {
				return true
			}
		}
	}
	return false
}

// supports reports whether a message says the sender supports (or
// requires) option tag.
func supports(m headered, tag string) bool {
	return hasOption(m, tag, "Supported", "k", "Require")
}

// allowsUpdate reports whether a message's Allow lists UPDATE.
func allowsUpdate(m headered) bool {
	return hasOption(m, "UPDATE", "Allow")
}

// tooSmall422 answers a request whose Session-Expires is below the box's
// Min-SE with 422 (RFC 4028 §8.1, §9); it reports whether it did.
func tooSmall422(tx sip.ServerTransaction, req *sip.Request) bool {
	if n, _, ok := sessionExpires(req); !ok || n >= minSE {
		return false
	}
	_ = respondBody(tx, req, 422, "Session Interval Too Small", nil, "", sip.NewHeader("Min-SE", strconv.Itoa(minSE)))
	return true
}

// sessionOffer is what the box asks of a callee (the B-leg INVITE): the
// caller's Session-Expires when it sent one, else Config.SessionExpires
// (0 = no timer asked for), and a Min-SE no lower than the caller's.
func (s *Settings) sessionOffer(aReq *sip.Request) (se, min int) {
	min = max(minSE, minSEOf(aReq))
	if n, _, ok := sessionExpires(aReq); ok {
		return max(n, min), min
	}
	if s.sessionExpires() == 0 {
		return 0, min
	}
	return max(s.sessionExpires(), min), min
}

// sessionExpires is Config.SessionExpires with its default; 0 = off.
func (s *Settings) sessionExpires() int {
	switch {
	case s.cfg.SessionExpires == 0:
		return defaultSessionExpires
	case s.cfg.SessionExpires < 0:
		return 0
	}
	return max(s.cfg.SessionExpires, minSE)
}

// calleeSession is the session timer of a callee's dialog from its 2xx
// res to our INVITE req: the interval and refresher it chose, or, when
// it keeps no timer (no Session-Expires in the 2xx), the interval we
// asked for with the box as the refresher (its refreshes double as a
// liveness check).
func calleeSession(req *sip.Request, res *sip.Response) sessionState {
	st := sessionState{update: allowsUpdate(res), last: time.Now()}
	if n, ref, ok := sessionExpires(res); ok {
		st.interval, st.weRefresh = max(n, minSE), ref != "uas"
		return st
	}
	if n, _, ok := sessionExpires(req); ok {
		st.interval, st.weRefresh = n, true
	}
	return st
}

// callerSession is the session timer of the caller's dialog: the
// caller's Session-Expires (lowered to the callee's interval bIv when that
// is shorter), or the callee's interval, or Config.SessionExpires; the
// refresher is the one the caller named, else the caller when it supports
// timers, else the box (RFC 4028 §9). interval 0 = no timer.
func (s *Settings) callerSession(aReq *sip.Request, bIv int) sessionState {
	st := sessionState{update: allowsUpdate(aReq), last: time.Now()}
	n, ref, ok := sessionExpires(aReq)
	switch {
	case ok && bIv > 0:
		st.interval = min(n, bIv)
	case ok:
		st.interval = n
	case bIv > 0:
		st.interval = bIv
	default:
		st.interval = s.sessionExpires()
	}
	if st.interval == 0 {
		return st
	}
	st.interval = max(st.interval, minSE, minSEOf(aReq))
	switch {
	case ref == "uac" && supports(aReq, "timer"):
		st.weRefresh = false
	case ref == "uas" || !supports(aReq, "timer"):
		st.weRefresh = true
	}
	return st
}

// sessionHeaders are the Session-Expires (and Require) of our 2xx to the
// party's INVITE or UPDATE, or of a request we send it: refresher is the
// party when it refreshes ("uac" in our answers to its requests, "uas" in
// our requests). nil when the dialog has no timer.
func (p *party) sessionHeaders(ours bool) []sip.Header {
	h := p.lock()
	st := p.timer.st
	h.mu.Unlock()
	if st.interval == 0 {
		return nil
	}
	// In our requests the box is the UAC; in our answers, the UAS.
	boxRole, partyRole := "uas", "uac"
	if ours {
		boxRole, partyRole = "uac", "uas"
	}
	ref := partyRole
	if st.weRefresh {
		ref = boxRole
	}
	hs := []sip.Header{sip.NewHeader("Session-Expires", strconv.Itoa(st.interval)+";refresher="+ref)}
	if !ours {
		hs = append(hs, sip.NewHeader("Require", "timer"))
	}
	return hs
}

// answerSessionHeaders are the headers of our 2xx to an initial INVITE
// req from the party: Require: timer only when it said it supports it.
func (p *party) answerSessionHeaders(req *sip.Request) []sip.Header {
	hs := p.sessionHeaders(false)
	if len(hs) > 1 && !supports(req, "timer") {
		hs = hs[:1] // RFC 4028 §9: no Require: timer toward a UA without support
	}
	return hs
}

// setSession gives the party its session timer and arms it when it is
// not yet.
func (p *party) setSession(st sessionState) {
	h := p.lock()
	p.timer.st = st
	h.mu.Unlock()
	p.startSession()
}

// startSession arms the party's session timer once, when the dialog has
// a timer (the call is up: its 2xx was ACKed). A timer rather than a
// goroutine a party: at 1,000 calls/s held 1 s, these goroutines and the
// keep-alives' were 3,090 of the box's 3,366, each parked for the call with
// a stack the collector scanned every cycle (bench/RESULTS.md, issue 16
// item 1). The timer counts in inflight from here until it has stopped
// for good (see stopSessionLocked).
func (p *party) startSession() {
	h := p.lock()
	defer h.mu.Unlock()
	if p.timer.t != nil || p.timer.st.interval == 0 || p.rem.gone {
		return
	}
	p.timer.st.last = time.Now()
	p.b.inflight.Add(1)
	p.timer.t = time.AfterFunc(time.Until(p.timer.st.due()), p.onSessionTimer)
}

// due is when the timer must act: the refresh at half the interval when
// the box refreshes (or the retry after a refresh that could not run),
// else the expiry check a little before the interval ends.
func (st sessionState) due() time.Time {
	iv := sessionSeconds(st.interval)
	if st.weRefresh {
		if due := st.last.Add(iv / 2); due.After(st.retryAt) {
			return due
		}
		return st.retryAt
	}
	return st.last.Add(iv - min(sessionSeconds(32), iv/3))
}

// stopSessionLocked stops the party's session timer as the party goes
// (its home's lock held, p.rem.gone set): a timer stopped before it fired
// is done here; one firing now sees the party gone and is done there.
func (p *party) stopSessionLocked() {
	if p.timer.t != nil && p.timer.t.Stop() {
		p.b.inflight.Add(-1)
	}
}

// refreshedIn notes a refresh request from the party (a re-INVITE or
// UPDATE we answered 2xx): its Session-Expires, if any, sets the interval
// and refresher (RFC 4028 §9); without one the timer goes on as it was.
func (p *party) refreshedIn(req *sip.Request) {
	h := p.lock()
	st := p.timer.st
	h.mu.Unlock()
	st.last = time.Now()
	if n, ref, ok := sessionExpires(req); ok {
		st.interval = max(n, minSE)
		// The party is the UAC of its request: refresher=uac is the party.
		st.weRefresh = ref == "uas" || ref == "" && !supports(req, "timer")
	}
	p.setSession(st)
}

// refreshedOut notes the 2xx res to a re-INVITE or UPDATE we sent the
// party: its Session-Expires, if any, sets interval and refresher.
func (p *party) refreshedOut(res *sip.Response) {
	n, ref, ok := sessionExpires(res)
	h := p.lock()
	defer h.mu.Unlock()
	p.timer.st.last = time.Now()
	if ok && p.timer.st.interval > 0 {
		p.timer.st.interval = max(n, minSE)
		p.timer.st.weRefresh = ref != "uas"
	}
}

// onSessionTimer is the session timer firing (RFC 4028 §10); once it is
// not armed again, it is done (inflight).
func (p *party) onSessionTimer() {
	if !p.sessionTick() {
		p.b.inflight.Add(-1)
	}
}

// sessionTick refreshes the session when the box is the refresher and it
// is due, ends the call when the party let it expire, and otherwise
// re-arms the timer for the next due time, which it reports.
func (p *party) sessionTick() (armed bool) {
	for {
		h := p.lock()
		st, gone, c := p.timer.st, p.rem.gone, p.c
		if gone || st.interval == 0 {
			h.mu.Unlock()
			return false
		}
		if d := time.Until(st.due()); d > 0 {
			p.timer.t.Reset(d)
			h.mu.Unlock()
			return true
		}
		h.mu.Unlock()
		if c == nil {
			return false
		}
		if st.weRefresh && time.Now().Before(st.last.Add(sessionSeconds(st.interval))) {
			switch p.refreshSession(c) {
			case refreshDone:
				p.setRetry(time.Time{})
			case refreshLater:
				p.setRetry(time.Now().Add(sessionSeconds(2)))
			case refreshDead:
				p.b.log.Info("b2bua: session refresh failed: call ended", "call", c.info.ID, "party", p.name)
				c.end(Dead, BySystem)
				return false
			}
			continue
		}
		p.b.log.Info("b2bua: session expired: call ended", "call", c.info.ID, "party", p.name, "interval", st.interval)
		c.end(Dead, BySystem)
		return false
	}
}

// setRetry sets when a refresh that could not run is tried again (zero:
// after a refresh, at the usual time).
func (p *party) setRetry(at time.Time) {
	h := p.lock()
	p.timer.st.retryAt = at
	h.mu.Unlock()
}

type refreshOutcome int

const (
	refreshDone  refreshOutcome = iota // refreshed
	refreshLater                       // not now (an exchange runs, glare, a passing refusal)
	refreshDead                        // 408, 481 or no answer: the dialog is gone
)

// refreshSession sends the party a session refresh: an UPDATE without
// body when it accepts UPDATE, else a re-INVITE repeating the description
// it last got from us (RFC 4028 §7.4, RFC 3264 §8: no change). It runs
// as an offer/answer exchange of the call so that it never crosses one.
func (p *party) refreshSession(c *call) refreshOutcome {
	ex := newExchange(nil, nil)
	if c.begin(ex) != 0 {
		return refreshLater
	}
	defer c.finishExchange(ex)
	h := p.lock()
	update, sdp := p.timer.st.update, p.sdp.out
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.life, 64*sip.T1)
	defer cancel()
	var res *sip.Response
	var err error
	if update || len(sdp) == 0 {
		req := p.newRequest(sip.UPDATE)
		p.addRefreshHeaders(req)
		res, err = p.do(ctx, req)
	} else {
		req := p.newRequest(sip.INVITE)
		req.AppendHeader(sip.NewHeader("Allow", allowInDialog))
		p.addRefreshHeaders(req)
		req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
		req.SetBody(sdp)
		res, err = p.invite(ctx, req)
		if err == nil && res.IsSuccess() {
			p.ackNow(req.CSeq().SeqNo, nil, "")
		}
	}
	switch {
	case c.life.Err() != nil:
		return refreshLater // the call ended meanwhile; the loop sees the party gone
	case err != nil || res.StatusCode == 408 || res.StatusCode == 481:
		return refreshDead
	case res.IsSuccess():
		p.refreshedOut(res)
		return refreshDone
	case res.StatusCode == 422:
		if n := minSEOf(res); n > 0 {
			h := p.lock()
			p.timer.st.interval = max(p.timer.st.interval, n)
			h.mu.Unlock()
		}
	case update && (res.StatusCode == 405 || res.StatusCode == 501):
		h := p.lock()
		p.timer.st.update = false // it did not mean it: refresh by re-INVITE
		h.mu.Unlock()
	}
	return refreshLater
}

// addSessionHeaders adds the dialog's Session-Expires to a re-INVITE or
// UPDATE the box relays to the party (its 2xx then refreshes it).
func (p *party) addSessionHeaders(req *sip.Request) {
	hs := p.sessionHeaders(true)
	if len(hs) == 0 {
		return
	}
	for _, h := range hs {
		req.AppendHeader(h)
	}
	req.AppendHeader(sip.NewHeader("Supported", "timer"))
}

// addRefreshHeaders adds Session-Expires (the box the refresher),
// Supported and Min-SE to a refresh request.
func (p *party) addRefreshHeaders(req *sip.Request) {
	for _, h := range p.sessionHeaders(true) {
		req.AppendHeader(h)
	}
	req.AppendHeader(sip.NewHeader("Supported", "timer"))
	req.AppendHeader(sip.NewHeader("Min-SE", strconv.Itoa(minSE)))
}
