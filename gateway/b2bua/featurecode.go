package b2bua

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// featureCode is a number a local user dials to change a setting of its
// own Services. The codes are the common ones of hosted PBXs (BroadWorks,
// and the defaults of most phones' DND and forward keys); a forward's
// code is followed by the number to forward to.
type featureCode struct {
	code       string
	feature    Feature
	on         bool // DND on; a forward set (with a number)
	withNumber bool
}

var featureCodes = []featureCode{
	{"*78", FeatureDND, true, false},
	{"*79", FeatureDND, false, false},
	{"*72", FeatureForwardAlways, true, true},
	{"*73", FeatureForwardAlways, false, false},
	{"*90", FeatureForwardBusy, true, true},
	{"*91", FeatureForwardBusy, false, false},
	{"*92", FeatureForwardNoAnswer, true, true},
	{"*93", FeatureForwardNoAnswer, false, false},
}

// parseFeatureCode finds the feature code number dials and what follows
// it. A code that takes a number matches as a prefix (alone it is
// incomplete: arg ""), the others only exactly.
func parseFeatureCode(number string) (fc featureCode, arg string, ok bool) {
	for _, fc := range featureCodes {
		rest, found := strings.CutPrefix(number, fc.code)
		if found && (rest == "" || fc.withNumber) {
			return fc, rest, true
		}
	}
	return featureCode{}, "", false
}

// serveFeature handles a local user's call to feature code fc: the
// change is checked and stored, then the call is answered and hung up
// (confirmFeature); a forward without a number gets 484, one the dial
// plan cannot route 404, one back to the user itself 482.
func (c *call) serveFeature(fc featureCode, arg string) {
	defer c.abort(nil)
	ext := c.info.From
	ch := ServiceChange{Feature: fc.feature, On: fc.on}
	if fc.withNumber {
		d, ok := c.router.Outbound(arg)
		switch {
		case arg == "":
			c.respondA(484, "Address Incomplete")
			c.end(Failed, BySystem)
			return
		case !ok || d.Route == "":
			c.respondA(404, "Not Found")
			c.end(Failed, BySystem)
			return
		case d.Route == dialplan.RouteLocal && d.Target == ext:
			c.respondA(482, "Loop Detected")
			c.end(Failed, BySystem)
			return
		}
		ch.Number = arg
	}
	if err := c.set.cfg.Services.SetService(ext, ch); err != nil {
		c.b.log.Warn("b2bua: feature code not stored", "call", c.info.ID, "extension", ext, "code", fc.code, "err", err)
		if errors.Is(err, ErrNotLocal) {
			c.respondA(403, "Forbidden")
		} else {
			c.respondA(500, "Server Internal Error")
		}
		c.end(Failed, BySystem)
		return
	}
	c.b.watchedChanged(ext) // DND shows in presence
	c.b.log.Info("b2bua: feature set from phone", "extension", ext, "feature", fc.feature, "on", fc.on, "number", ch.Number)
	c.confirmFeature()
}

// confirmFeature answers a served feature code with 200, media inactive
// (the phone shows the call connected: the change was made), and hangs
// up once the phone's ACK came. The CDR says "service".
func (c *call) confirmFeature() {
	if _, ok := c.answerByBox(inactiveSDP(c.setup.aReq.Body(), addrOf(c.local.arrived, c.local.contact)), StateAnswered); ok {
		c.end(Service, BySystem)
	}
}

// answerByBox answers the caller's INVITE with 200 and body from the box
// itself (no leg B: a feature code, a queue) and puts the call in state.
// When the caller does not take the answer, the call ends as failed and
// ok is false.
func (c *call) answerByBox(body []byte, state string) (pa *party, ok bool) {
	pa = newCallerParty(c.b, c, c.setup.aReq, c.setup.a, c.local.arrived, c.local.contact)
	pa.trusted = c.trusted
	pa.noteIn(c.setup.aReq.Body(), contentTypeOf(c.setup.aReq))
	body = pa.outSDP(body)
	pa.attach(c, LegA)
	c.mu.Lock()
	c.parties[LegA] = pa
	c.setup.users = 1
	c.cdr.Answer, c.cdr.Status = time.Now(), 200
	c.mu.Unlock()
	c.b.register(pa)
	c.setState(state)
	ct := sip.ContentTypeHeader("application/sdp")
	if err := c.setup.a.Respond(200, "OK", body, append(c.set.warnings(), &ct)...); err != nil {
		c.b.log.Info("b2bua: caller did not confirm the answer", "call", c.info.ID, "err", err)
		pa.confirm()
		c.end(Failed, BySystem)
		return pa, false
	}
	c.setupDone()
	c.mu.Lock()
	c.confirmed = true
	c.mu.Unlock()
	return pa, true
}

// inactiveSDP is the box's answer to offer (its own offer when there is
// none) for a call it answers only to hang up: the first RTP/AVP audio
// stream inactive on the discard port, every other stream refused with
// port 0 (RFC 3264 §6), so nothing flows and no port is bound.
func inactiveSDP(offer []byte, addr netip.Addr) []byte {
	ip := "IP4"
	if addr.Is6() {
		ip = "IP6"
	}
	id := strconv.FormatInt(time.Now().Unix(), 10)
	lines := []string{"v=0", "o=outpost " + id + " " + id + " IN " + ip + " " + addr.String(), "s=-",
		"c=IN " + ip + " " + addr.String(), "t=0 0"}
	var ms []string
	var rtpmaps []string
	for _, l := range strings.Split(string(offer), "\n") {
		l = strings.TrimSpace(l)
		if m, ok := strings.CutPrefix(l, "m="); ok {
			ms = append(ms, m)
		} else if a, ok := strings.CutPrefix(l, "a=rtpmap:"); ok {
			rtpmaps = append(rtpmaps, a)
		}
	}
	if len(ms) == 0 {
		ms = []string{"audio 9 RTP/AVP 0 8"}
	}
	audio := false
	for _, m := range ms {
		f := strings.Fields(m)
		if len(f) < 4 {
			continue // not an m= line RFC 4566 allows: nothing to answer it with
		}
		if audio || f[0] != "audio" || f[1] == "0" || f[2] != "RTP/AVP" {
			lines = append(lines, "m="+f[0]+" 0 "+f[2]+" "+f[3])
			continue
		}
		audio = true
		pt := f[3]
		for _, p := range []string{"0", "8"} { // a static type needs no rtpmap
			if slices.Contains(f[3:], p) {
				pt = p
				break
			}
		}
		lines = append(lines, "m=audio 9 RTP/AVP "+pt)
		for _, a := range rtpmaps {
			if strings.HasPrefix(a, pt+" ") {
				lines = append(lines, "a=rtpmap:"+a)
				break
			}
		}
		lines = append(lines, "a=inactive")
	}
	return []byte(strings.Join(lines, "\r\n") + "\r\n")
}
