package b2bua

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/media/sdprewrite"
)

// mkSDP is one audio stream at 127.0.0.1:port, direction dir ("" = none).
func mkSDP(user string, sess, ver, port int, dir string) []byte {
	s := fmt.Sprintf("v=0\r\no=%s %d %d IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio %d RTP/AVP 0\r\n", user, sess, ver, port)
	if dir != "" {
		s += "a=" + dir + "\r\n"
	}
	return []byte(s)
}

// dirOf is the audio direction of an SDP body as sdprewrite reads it
// (media level, else session level, else sendrecv); "" when the body has
// no audio stream.
func dirOf(body []byte) string {
	s, err := sdprewrite.Parse(body)
	if err != nil {
		return ""
	}
	return s.Audio.Direction.String()
}

// mediaPort is the phone's (pretend) RTP port.
func (p *phone) mediaPort() int { return 20000 + p.port%20000 }

// answerMirror answers an in-dialog offer with the phone's own session in
// the matching direction (an offerless re-INVITE gets a sendrecv offer).
func answerMirror(p *phone, req *sip.Request) (int, []byte) {
	dir := "sendrecv"
	if s, err := sdprewrite.Parse(req.Body()); err == nil {
		dir = s.Audio.Direction.Reverse().String() // RFC 3264 §6.1
	}
	p.mu.Lock()
	if p.sdpUser == "" { // the phone's own session: sdpB when it answered, else sdpA
		p.sdpUser, p.sdpSess, p.ver = "a", 1, 1
	}
	p.ver++
	user, sess, v := p.sdpUser, p.sdpSess, p.ver
	p.mu.Unlock()
	return 200, mkSDP(user, sess, v, p.mediaPort(), dir)
}

// side is a phone's end of a dialog with the box.
type side interface {
	Do(ctx context.Context, req *sip.Request) (*sip.Response, error)
	WriteRequest(req *sip.Request) error
}

// boxOf is the box's Contact in a caller phone's dialog.
func (oc *outcall) boxOf() sip.Uri { return *oc.sess.InviteResponse.Contact().Address.Clone() }

// boxOfUAS is the box's Contact in a callee phone's dialog.
func boxOfUAS(d *sipgo.DialogServerSession) sip.Uri {
	return *d.InviteRequest.Contact().Address.Clone()
}

// send sends an in-dialog request from the phone and ACKs a 2xx to an
// INVITE. It returns nil (after t.Error) when no final response came.
func (p *phone) send(ctx context.Context, s side, to sip.Uri, method sip.RequestMethod, body []byte, ct string, hdrs ...sip.Header) *sip.Response {
	req := sip.NewRequest(method, to)
	for _, h := range hdrs {
		req.AppendHeader(h)
	}
	if len(body) > 0 {
		if ct == "" {
			ct = "application/sdp"
		}
		req.AppendHeader(sip.NewHeader("Content-Type", ct))
		req.SetBody(body)
	}
	res, err := s.Do(ctx, req)
	if err != nil {
		p.t.Errorf("%s: %s: %v", p.user, method, err)
		return nil
	}
	if method == sip.INVITE && res.IsSuccess() {
		if err := s.WriteRequest(sip.NewRequest(sip.ACK, to)); err != nil {
			p.t.Errorf("%s: ACK: %v", p.user, err)
		}
	}
	return res
}

// call places an answered call from a to b through the box (b answers
// with answerNow) and returns both ends.
func (e *env) call(ctx context.Context, a, b *phone, number string) (*outcall, *sipgo.DialogServerSession) {
	e.t.Helper()
	oc := a.dial(ctx, e.box, number, nil)
	if oc.err != nil || oc.final != 200 {
		e.t.Fatalf("call %s -> %s: %d %v", a.user, number, oc.final, oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		e.t.Fatal(err)
	}
	d := recv(e.t, b.answered, "answer at "+b.user)
	recv(e.t, b.acks, "ACK at "+b.user)
	return oc, d
}

// cdrs collects Config.OnEnd records.
type cdrs struct{ ch chan CDR }

func newCDRs() *cdrs { return &cdrs{ch: make(chan CDR, 16)} }

func (c *cdrs) on(r CDR) { c.ch <- r }

func (c *cdrs) next(t *testing.T) CDR {
	t.Helper()
	return recv(t, c.ch, "CDR")
}

// none checks that no further CDR was emitted (call after env.noCalls:
// every call has then run OnEnd).
func (c *cdrs) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-c.ch:
		t.Errorf("extra CDR: %+v", r)
	default:
	}
}

// fakeAnchor records the offer/answer traffic of one bridge and marks the
// SDP it hands on with an "a=x-anchor:..." line.
type fakeAnchor struct {
	mu      sync.Mutex
	callID  string
	a, b    netip.Addr
	ends    [2]End
	ops     []string // "offer A", "answer B", "reject A"
	closed  int
	refuse  bool // Offer fails
	onDead  func(string)
	factory *anchors
	box     bool // made for a bridge to the box (Bridge.Box)
	boxLeg  bool // BoxLeg was called
}

func (f *fakeAnchor) BoxLeg() {
	f.mu.Lock()
	f.boxLeg = true
	f.mu.Unlock()
}

func (f *fakeAnchor) mark(op string, sdp []byte) []byte {
	f.mu.Lock()
	f.ops = append(f.ops, op)
	f.mu.Unlock()
	return append(bytes.Clone(sdp), []byte("a=x-anchor:"+strings.ReplaceAll(op, " ", "-")+"\r\n")...)
}

func (f *fakeAnchor) Offer(from Leg, sdp []byte) ([]byte, error) {
	if f.refuse {
		return nil, errors.New("no common codec")
	}
	return f.mark("offer "+from.String(), sdp), nil
}

func (f *fakeAnchor) Answer(from Leg, sdp []byte) ([]byte, error) {
	return f.mark("answer "+from.String(), sdp), nil
}

func (f *fakeAnchor) Reject(from Leg) {
	f.mu.Lock()
	f.ops = append(f.ops, "reject "+from.String())
	f.mu.Unlock()
}

func (f *fakeAnchor) Close() {
	f.mu.Lock()
	f.closed++
	f.mu.Unlock()
}

func (f *fakeAnchor) snapshot() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...), f.closed
}

// anchors is a Config.Media factory of fakeAnchors.
type anchors struct {
	mu     sync.Mutex
	made   []*fakeAnchor
	refuse bool // the factory fails
	offerr bool // the anchors refuse offers
	direct bool // only bridges to the box are anchored (the rest: one segment, direct media)
}

func (s *anchors) media(br Bridge, onDead func(string)) (Anchor, error) {
	callID, a, b := br.CallID, br.A, br.B
	if s.refuse {
		return nil, errors.New("no ports left")
	}
	if s.direct && !br.Box {
		return nil, nil
	}
	f := &fakeAnchor{callID: callID, a: a, b: b, ends: [2]End{br.EndA, br.EndB}, onDead: onDead, refuse: s.offerr, factory: s, box: br.Box}
	s.mu.Lock()
	s.made = append(s.made, f)
	s.mu.Unlock()
	return f, nil
}

func (s *anchors) all() []*fakeAnchor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*fakeAnchor(nil), s.made...)
}

// header returns a request's header value ("" if absent).
func header(m interface{ GetHeader(string) sip.Header }, name string) string {
	if h := m.GetHeader(name); h != nil {
		return h.Value()
	}
	return ""
}
