package b2bua

import (
	"cmp"
	"context"
	"errors"
	"net/netip"
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/media/sdprewrite"
)

// The box's own voicemail (Config.Voicemail): a user's unanswered call
// (no answer, busy, unreachable, do-not-disturb) is answered by the box,
// which plays the greeting and records a message, when the Router says
// so (BoxVoicemail): always for a user whose voicemail is local, and for
// one whose voicemail is "fallback" when the pilot is not to be used (not
// in normal mode, no pilot) or when the call to the pilot failed, at once
// (the caller does not ring a second time).
//
// The media is always anchored: the relay faces the caller (SRTP,
// latching, media timeouts) and the line (plain RTP on the box's own
// address) answers the relay's offer. A call that had no anchor gets
// one; one that had, toward a phone, is re-offered to the line in plain
// RTP. A caller without an SDP offer, or with no G.711, cannot leave a
// message (the call fails as it would without voicemail).

// Mailboxes is the box's voicemail service (media/voicemail through the
// appliance).
type Mailboxes interface {
	// Open answers offer (the anchor's, plain RTP) with a line on the
	// box's address local.
	Open(local netip.Addr, offer []byte) (VoicemailLine, []byte, error)
	// Waiting is a mailbox's count of new and of saved messages (MWI).
	Waiting(mailbox string) (newMsgs, oldMsgs int)
}

// VoicemailLine is one call into the voicemail.
type VoicemailLine interface {
	// Deposit records a message for mailbox from caller; it returns when
	// the deposit is over or ctx ends (the caller hung up).
	Deposit(ctx context.Context, mailbox, caller, callerName string)
	// Retrieve runs the menu of mailbox, the caller's own; RetrieveAny
	// asks for a mailbox and its PIN first. Both return when the caller
	// hangs up (ctx) or leaves the menu.
	Retrieve(ctx context.Context, mailbox string)
	RetrieveAny(ctx context.Context)
	// Digit is a DTMF digit that came by SIP INFO.
	Digit(d byte)
	// Close releases the line.
	Close()
}

// BoxVoicemail is an optional interface of the Router: whether the box's
// voicemail takes a local extension's unanswered calls now, or only
// when the call to the voicemail pilot fails.
type BoxVoicemail interface {
	BoxVoicemail(extension string) (now, onPilotFailure bool)
}

// StateVoicemail: answered by the box's voicemail.
const StateVoicemail = "voicemail"

// voicemailPlan is where a local user's unanswered call goes.
type voicemailPlan struct {
	pilot          dialplan.Decision
	hasPilot       bool
	box, boxOnFail bool
}

// rings reports whether the user's phones ring for the voicemail's ring
// time (Config.VoicemailAfter) rather than the whole ring timeout.
func (p *voicemailPlan) rings() bool { return p != nil && (p.hasPilot || p.box) }

// voicemailOf is the plan for ext's unanswered calls; nil = none.
func (c *call) voicemailOf(ext string) *voicemailPlan {
	p := &voicemailPlan{}
	p.pilot, p.hasPilot = c.router.Voicemail(ext)
	if bv, ok := c.router.(BoxVoicemail); ok && c.set.cfg.Voicemail != nil && c.set.cfg.Media != nil {
		p.box, p.boxOnFail = bv.BoxVoicemail(ext)
	}
	if p.box {
		p.hasPilot = false
	}
	if !p.hasPilot && !p.box {
		return nil
	}
	return p
}

// toVoicemailOf sends the call to ext's voicemail after its phones did
// not take it (reason). It reports whether the caller got its final
// response here.
func (c *call) toVoicemailOf(vm *voicemailPlan, reason string) bool {
	if vm.hasPilot {
		if c.forward(vm.pilot, reason, true) {
			return true
		}
		if !vm.boxOnFail {
			return false
		}
		c.b.log.Info("b2bua: voicemail pilot failed: the box answers", "call", c.info.ID, "extension", c.d.Target)
	}
	return c.boxVoicemail(c.d.Target, reason)
}

// Voicemail feature codes: a local user's own mailbox, any mailbox with
// its PIN.
const (
	codeOwnMailbox = "*97"
	codeAnyMailbox = "*98"
)

// boxVoicemail answers the caller with the box's voicemail for mailbox
// and runs the deposit until it ends. It reports false, the caller not
// answered, when the media cannot reach the voicemail.
func (c *call) boxVoicemail(mailbox, reason string) bool {
	name := ""
	if f := c.setup.aReq.From(); f != nil {
		name = f.DisplayName
	}
	caller := c.info.From
	return c.answerVoicemail(func() {
		c.mu.Lock()
		if c.cdr.ForwardedFrom == "" {
			c.cdr.ForwardedFrom, c.cdr.ForwardReason = mailbox, reason
		}
		c.cdr.Target, c.cdr.Route, c.cdr.Disposition = mailbox, dialplan.RouteLocal, Voicemail
		c.toVoicemail = true
		c.mu.Unlock()
		c.b.log.Info("b2bua: voicemail answers", "call", c.info.ID, "mailbox", mailbox, "reason", reason)
	}, func(line VoicemailLine) { line.Deposit(c.life, mailbox, caller, name) }, Voicemail)
}

// serveMailbox answers a local user's call to a voicemail code with the
// retrieval menu; a caller the media cannot bring there gets 488.
func (c *call) serveMailbox(code string) {
	defer c.abort(nil)
	own := c.info.From
	ok := c.answerVoicemail(func() {
		c.mu.Lock()
		c.cdr.Target, c.cdr.Route, c.cdr.Disposition = own, dialplan.RouteLocal, Service
		c.mu.Unlock()
	}, func(line VoicemailLine) {
		if code == codeOwnMailbox {
			line.Retrieve(c.life, own)
		} else {
			line.RetrieveAny(c.life)
		}
	}, Service)
	if !ok {
		c.respondA(488, "Not Acceptable Here")
		c.end(Failed, BySystem)
	}
}

// answerVoicemail opens a voicemail line for the caller, answers it
// (answering called first) and runs run on the line; when run returns
// the box hangs up (disp). It reports false, the caller not answered,
// when the media cannot reach the voicemail.
func (c *call) answerVoicemail(answering func(), run func(VoicemailLine), disp Disposition) bool {
	vm := c.set.cfg.Voicemail
	offer := c.setup.aReq.Body()
	if len(offer) == 0 {
		c.b.log.Info("b2bua: voicemail needs an offer from the caller", "call", c.info.ID)
		return false
	}
	an, err := c.voicemailAnchor()
	if err != nil {
		c.b.log.Warn("b2bua: voicemail media", "call", c.info.ID, "err", err)
		return false
	}
	bOffer, err := an.Offer(LegA, offer)
	var line VoicemailLine
	var toA []byte
	if err == nil {
		var s *sdprewrite.SDP
		if s, err = sdprewrite.Parse(bOffer); err == nil {
			var ans []byte
			if line, ans, err = vm.Open(s.Audio.Addr, bOffer); err == nil {
				if toA, err = an.Answer(LegB, ans); err != nil {
					line.Close()
				}
			}
		}
	}
	if err != nil {
		c.b.log.Info("b2bua: voicemail refused by media", "call", c.info.ID, "err", err)
		an.Reject(LegA)
		return false
	}
	answering()
	c.mu.Lock()
	c.vmLine = line
	c.mu.Unlock()
	pa, ok := c.answerByBox(toA, StateVoicemail)
	if !ok {
		line.Close()
		return true
	}
	pa.awaitAck(c)
	run(line)
	line.Close()
	c.end(disp, BySystem)
	return true
}

// voicemailAnchor is the call's anchor, set up for a line on leg B: the
// existing one with leg B made plain RTP, else a new one whose leg B is
// the box.
func (c *call) voicemailAnchor() (Anchor, error) {
	if an := c.media(); an != nil {
		if p, ok := an.(BoxLeg); ok {
			p.BoxLeg()
		}
		return an, nil
	}
	a := addrOf(c.local.arrived, c.local.contact)
	an, err := c.set.cfg.Media(Bridge{CallID: c.info.ID, A: a, B: a, EndA: End{Route: dialplan.RouteLocal, Name: c.info.From}, Box: true}, c.onMediaDead)
	if err != nil || an == nil {
		return nil, cmp.Or(err, errNoAnchor)
	}
	c.mu.Lock()
	c.anchor = an
	c.mu.Unlock()
	return an, nil
}

// BoxLeg is an Anchor whose leg B can be turned toward the box itself
// (plain RTP, whatever the route's SRTP policy said).
type BoxLeg interface {
	BoxLeg()
}

// errNoAnchor: the media part anchored no call for the voicemail.
var errNoAnchor = errors.New("b2bua: no media anchor for the voicemail")

// OnInfo takes an in-dialog INFO carrying a DTMF digit (application/
// dtmf-relay "Signal=5", or application/dtmf "5") for a call the box's
// voicemail answered. It reports false for every other INFO, which the
// caller answers as before.
func (b *B2BUA) OnInfo(req *sip.Request, tx sip.ServerTransaction) bool {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	p := b.partyOf(req)
	if p == nil {
		return false
	}
	c, _ := p.bridge()
	if c == nil {
		return false
	}
	c.mu.Lock()
	line := c.vmLine
	c.mu.Unlock()
	if line == nil {
		return false
	}
	d, ok := infoDigit(contentTypeOf(req), req.Body())
	if !ok {
		respond(tx, req, 415, "Unsupported Media Type")
		return true
	}
	line.Digit(d)
	respond(tx, req, 200, "OK")
	return true
}

// infoDigit reads the digit of an INFO body.
func infoDigit(ct string, body []byte) (byte, bool) {
	v := strings.TrimSpace(string(body))
	switch mediaType(ct) {
	case "application/dtmf-relay":
		for _, l := range strings.Split(v, "\n") {
			k, val, ok := strings.Cut(l, "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "signal") {
				v = strings.TrimSpace(val)
				break
			}
		}
	case "application/dtmf":
	default:
		return 0, false
	}
	switch v = strings.ToUpper(v); {
	case len(v) == 1 && strings.Contains("0123456789*#ABCD", v):
		return v[0], true
	case v == "10":
		return '*', true
	case v == "11":
		return '#', true
	}
	return 0, false
}
