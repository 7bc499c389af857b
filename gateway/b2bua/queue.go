package b2bua

import (
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/media/sdprewrite"
)

// Group queues: a group with Queue set does not give up when its ringing
// finds nobody: the box answers the caller, who hears music on hold (on
// a call the relay anchors; silence otherwise), and rings the group's
// free members (in the group's order; registered, not in a call, not in
// do-not-disturb) one at a time for their ring time, each once a round,
// a round starting whenever a call ends on the box (a member may be
// free) and at least every queueRetry. A member who answers gets the
// caller as a blind transfer would move it; after Queue, the overflow
// (a transfer too), else the caller is hung up. Not done: several queued
// calls served in their arrival order (each rings free members on its
// own), and announcements of the caller's place in the queue.

// wakeup wakes whoever waits for a change (a call that ended: a member
// may be free): wait returns a channel that closes at the next fire.
type wakeup struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *wakeup) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *wakeup) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// queueRetry bounds the wait between two rounds of a queued call when no
// call ended meanwhile (a phone registering makes a member free too).
const queueRetry = 2 * time.Second

// queue answers c's caller and keeps it in g's queue (see above). It
// reports false, with the caller not answered, when the box could not
// answer it (the media refused the queue's answer): the overflow comes
// next as without a queue.
func (c *call) queue(g *Group) bool {
	pa, ok := c.answerQueued()
	if !ok {
		return false
	}
	c.b.log.Info("b2bua: group call queued", "call", c.info.ID, "group", g.Extension)
	deadline := time.Now().Add(g.Queue)
	tried := map[string]bool{} // free members rung in this round, who did not answer
	for c.life.Err() == nil && time.Now().Before(deadline) {
		woken := c.b.callEnded.wait()
		if m := c.freeMember(g, tried); m != "" {
			if code := c.blindRing(nil, pa, sip.Uri{User: m}, nil, g.RingTime); code >= 200 && code < 300 {
				c.end(Transferred, BySystem)
				return true
			}
			tried[m] = true
			continue // the next free member, at once
		}
		clear(tried) // every free member was rung: the next round after a wait
		t := time.NewTimer(min(queueRetry, time.Until(deadline)))
		select {
		case <-c.life.Done():
		case <-woken:
		case <-t.C:
		}
		t.Stop()
	}
	if c.life.Err() != nil {
		return true // the caller hung up: its BYE ended the call
	}
	switch g.Overflow {
	case "":
	case GroupVoicemail:
		if vm, ok := c.router.Voicemail(g.Extension); ok {
			c.addDiversion(g.Extension, "no-answer")
			if code := c.blindRing(nil, pa, sip.Uri{User: vm.Number}, c.diversions, 0); code >= 200 && code < 300 {
				c.end(Transferred, BySystem)
				return true
			}
		}
	default:
		if code := c.blindRing(nil, pa, sip.Uri{User: g.Overflow}, nil, 0); code >= 200 && code < 300 {
			c.end(Transferred, BySystem)
			return true
		}
	}
	c.end(NoAnswer, BySystem)
	return true
}

// freeMember is g's first member (in its order), not in skip, who could
// take a call now: not in a call, not in do-not-disturb, with a phone
// registered.
func (c *call) freeMember(g *Group, skip map[string]bool) string {
	for _, m := range g.order(c.b.groupState(g.Extension)) {
		if skip[m] || c.b.inCall(m, c) || c.set.services(m).DND || len(c.b.loc.Contacts(m)) == 0 {
			continue
		}
		return m
	}
	return ""
}

// answerQueued answers the caller with 200 for the queue: through the
// anchor, as if leg B answered from nowhere (c=0.0.0.0), so the caller
// is told the box only sends, and the anchor holds for leg B (music on
// hold); without an anchor, with media inactive.
func (c *call) answerQueued() (*party, bool) {
	body := inactiveSDP(c.setup.aReq.Body(), addrOf(c.local.arrived, c.local.contact))
	if an := c.media(); an != nil {
		ans, ok := queueAnswer(c.setup.offer)
		if !ok {
			return nil, false
		}
		toA, err := an.Answer(LegB, ans)
		if err != nil {
			c.b.log.Info("b2bua: group queue refused by media", "call", c.info.ID, "err", err)
			return nil, false
		}
		if h, ok := an.(HoldAnchor); ok {
			h.HoldFor(LegB, true)
		}
		body = toA
	}
	c.mu.Lock()
	c.cdr.Disposition = Answered
	c.mu.Unlock()
	pa, ok := c.answerByBox(body, StateQueued)
	if ok {
		pa.awaitAck(c)
	}
	return pa, true // not taken: the call ended, which the queue sees
}

// queueAnswer is the answer of an absent leg B to the box's offer: its
// first audio codec, from c=0.0.0.0 (RFC 2543 hold: nothing is sent to
// it, and its own direction makes the caller's receive-only).
func queueAnswer(offer []byte) ([]byte, bool) {
	s, err := sdprewrite.Parse(offer)
	if err != nil {
		return nil, false
	}
	var cs []sdprewrite.Codec
	for _, c := range s.Audio.Codecs {
		if !c.Is("telephone-event") && c.Name != "" {
			cs = append(cs, c)
			break
		}
	}
	if len(cs) == 0 {
		return nil, false
	}
	body := string(answerSDP(s, cs))
	addr := s.Audio.Addr.String()
	body = strings.ReplaceAll(body, "IN IP4 "+addr, "IN IP4 0.0.0.0")
	body = strings.ReplaceAll(body, "IN IP6 "+addr, "IN IP6 ::")
	return []byte(body), true
}
