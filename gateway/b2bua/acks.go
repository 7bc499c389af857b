package b2bua

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// The ACKs of 2xx responses to our INVITEs, kept to answer the 2xx's
// retransmissions (issue 16 item 1).
//
// RFC 3261 §13.2.2.4: the callee retransmits its 2xx until our ACK
// arrives, and the UAC core (not the transaction) re-sends the ACK for
// each retransmission. RFC 6026 keeps the INVITE client transaction in
// Accepted for Timer M to match them; sipgo does, and its WriteAck hangs
// a closure on the transaction that holds the dialog session (our INVITE,
// the 2xx) and a parsed copy of the ACK. At 2,500 calls/s, with Timer M
// at 2 s, that was half of the live heap (80 MB; 41 MB with Timer M at
// zero, bench/RESULTS.md), and a 150 MiB memory limit left the collector
// running back to back.
//
// Decision: sipgo's INVITE client transactions end as soon as their 2xx
// is passed up (Timer M 0, set below), and the ACKs this package sends
// for 2xx responses (party.ackNow; ackLeg for a leg without a party) are
// kept as their bytes (~600) for 2 to 3 s (ackGens generations of
// ackGen), keyed by Call-ID, CSeq number and To tag: 37 MB of live heap
// at 2,500 calls/s. A retransmitted 2xx then matches no transaction:
// sipgo hands it to the transaction layer's unhandled-response handler,
// where the gateway calls OnStrayResponse, which re-sends the ACK. The
// window is the one the transactions had (gateway retainFinished): the
// callee retransmits 0.5 and 1.5 s after its first 2xx, and an ACK lost
// three times is not re-sent later. An ACK is kept right after it is
// sent (sipgo writes its Via as it sends it); a retransmission, T1 after
// the 2xx at the earliest, does not race that. Re-INVITEs' ACKs are kept
// the same way.
//
// A 2xx from another fork of the INVITE (another To tag: a forking proxy
// at HQ whose phones answered at once) reaches us the same way, and
// RFC 3261 §13.2.2.4 wants it ACKed and its dialog ended with a BYE:
// OnStrayResponse does both (endFork), and keeps that ACK with the
// winner's for the fork's retransmissions. The kept ACK of the winner is
// what shows the 2xx answers one of our INVITEs (a forged one gets
// nothing), so a fork's 2xx is ended once it arrives while that ACK is
// kept: within 2 to 3 s after our ACK of the winner. Its first 2xx may
// come before (our ACK waits for the caller's); its retransmissions, T1,
// 2*T1 and 4*T1 apart, then land in the window unless the caller took
// over 1.5 s to ACK. At most maxForks forks an INVITE are ended.
func init() { sip.Timer_M = 0 }

const (
	ackGen  = time.Second
	ackGens = 3 // an ACK is kept for (ackGens-1)*ackGen to ackGens*ackGen
	// ackResends bounds the ACKs one kept ACK is re-sent as: a callee
	// retransmits at most three times in the window; forged 2xx
	// responses get no more.
	ackResends = 8
	// maxForks bounds the other forks' 2xx responses to one INVITE that
	// are ACKed and ended (a ring group's phones answering at once).
	maxForks = 8
)

// sentAck is an ACK as it went out, and where to.
type sentAck struct {
	msg       string // "" while a fork's ACK is being sent
	dest      string // host:port
	transport string
	laddr     sip.Addr // the UDP listener it left from; zero = any
	toTag     string   // the 2xx's
	resent    int
	forks     []sentAck // ACKs of other forks' 2xx to the same INVITE
}

// ackMatch is what a stray response is to the ACKs kept.
type ackMatch int

const (
	noAck    ackMatch = iota // not a 2xx to an INVITE of ours ACKed lately
	ackAgain                 // a retransmitted 2xx: send its ACK again
	newFork                  // another fork's 2xx: ACK it and end its dialog
)

// ackStore keeps the ACKs we sent for 2xx responses, by ackKey, in
// generations: a generation older than ackGens*ackGen is dropped whole,
// with no timer or per-entry expiry.
type ackStore struct {
	mu   sync.Mutex
	gens [ackGens]map[string]sentAck // gens[0] is the newest
	turn time.Time                   // when gens[0] began
	now  func() time.Time
	bufs sync.Pool
}

func newAckStore(now func() time.Time) *ackStore {
	s := &ackStore{now: now}
	for i := range s.gens {
		s.gens[i] = map[string]sentAck{}
	}
	s.turn = now()
	s.bufs.New = func() any { return new(bytes.Buffer) }
	return s
}

// ackKey is the key of the ACKs of the 2xx responses to the INVITE with
// these Call-ID and CSeq number.
func ackKey(callID string, cseq uint32) string {
	var b strings.Builder
	b.Grow(len(callID) + 11)
	b.WriteString(callID)
	b.WriteByte(' ')
	b.WriteString(strconv.FormatUint(uint64(cseq), 10))
	return b.String()
}

// rotate starts the generations due at now. Called with mu held.
func (s *ackStore) rotate(now time.Time) {
	steps := int(now.Sub(s.turn) / ackGen)
	if steps <= 0 {
		return
	}
	s.turn = s.turn.Add(time.Duration(steps) * ackGen)
	for range min(steps, ackGens) {
		// The oldest map, emptied, becomes the newest: its buckets stay
		// sized for the load, so a busy second allocates no map.
		old := s.gens[ackGens-1]
		clear(old)
		copy(s.gens[1:], s.gens[:ackGens-1])
		s.gens[0] = old
	}
}

// keep remembers ack, which has just been sent for a 2xx (its headers,
// Via included, as they went out). The ACK of another fork's 2xx joins
// the winner's.
func (s *ackStore) keep(ack *sip.Request) {
	cid, cs, to := ack.CallID(), ack.CSeq(), ack.To()
	if cid == nil || cs == nil || to == nil {
		return
	}
	tag, _ := to.Params.Get("tag")
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	ack.StringWrite(buf)
	a := sentAck{msg: buf.String(), dest: strings.Clone(ack.Destination()), transport: ack.Transport(), laddr: ack.Laddr,
		toTag: strings.Clone(tag)}
	s.bufs.Put(buf)
	key := ackKey(string(*cid), cs.SeqNo)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate(s.now())
	if g, w, ok := s.find(key); ok {
		if w.toTag == tag { // sent again: keep the forks noted
			a.forks = w.forks
			g[key] = a
			return
		}
		if f := w.fork(tag); f != nil {
			*f = a
			return
		}
		if len(w.forks) < maxForks {
			w.forks = append(w.forks, a)
			g[key] = w
		}
		return
	}
	s.gens[0][key] = a
}

// fork is the kept ACK of the fork with To tag tag, nil if none. It
// points into w's forks, which w's map entry shares.
func (w *sentAck) fork(tag string) *sentAck {
	for i := range w.forks {
		if w.forks[i].toTag == tag {
			return &w.forks[i]
		}
	}
	return nil
}

// find is the entry of key and the generation holding it. Called with mu
// held.
func (s *ackStore) find(key string) (map[string]sentAck, sentAck, bool) {
	for _, g := range s.gens {
		if a, ok := g[key]; ok {
			return g, a, true
		}
	}
	return nil, sentAck{}, false
}

// resend matches the stray response res against the ACKs kept. For a
// retransmitted 2xx (ackAgain) it returns the ACK to send again,
// counting the re-send; for another fork's 2xx (newFork), the winner's
// ACK (its transport and listener), with the fork noted so that it is
// ended once.
func (s *ackStore) resend(res *sip.Response) (sentAck, ackMatch) {
	cid, cs, to := res.CallID(), res.CSeq(), res.To()
	if cid == nil || cs == nil || to == nil || cs.MethodName != sip.INVITE || !res.IsSuccess() {
		return sentAck{}, noAck
	}
	tag, _ := to.Params.Get("tag")
	key := ackKey(string(*cid), cs.SeqNo)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate(s.now())
	g, w, ok := s.find(key)
	if !ok {
		return sentAck{}, noAck
	}
	a := &w
	if tag != w.toTag {
		if a = w.fork(tag); a == nil {
			if len(w.forks) >= maxForks || tag == "" {
				return sentAck{}, noAck
			}
			w.forks = append(w.forks, sentAck{toTag: strings.Clone(tag)})
			g[key] = w
			return w, newFork
		}
	}
	if a.resent >= ackResends {
		return sentAck{}, noAck
	}
	a.resent++
	g[key] = w
	return *a, ackAgain
}

// OnStrayResponse handles a response that matched no client transaction
// (the gateway's unhandled-response handler): a retransmitted 2xx to one
// of our INVITEs gets our ACK again. It reports whether it did.
func (b *B2BUA) OnStrayResponse(res *sip.Response) bool {
	a, m := b.acks.resend(res)
	switch {
	case m == noAck:
		return false
	case m == newFork:
		b.endFork(res, a)
		return true
	case a.msg == "":
		return true // the fork's ACK is on its way
	}
	msg, err := sip.ParseMessage([]byte(a.msg))
	ack, _ := msg.(*sip.Request)
	if err != nil || ack == nil {
		b.log.Warn("b2bua: kept ACK does not parse", "err", err)
		return false
	}
	ack.SetTransport(a.transport)
	ack.SetDestination(a.dest)
	ack.Laddr = a.laddr
	if err := b.client.WriteRequest(ack, sendAsIs); err != nil {
		b.log.Debug("b2bua: ACK of a retransmitted 2xx", "err", err)
	}
	return true
}

// sendAsIs is a sipgo ClientRequestOption that leaves the request as it
// is (any option replaces sipgo's default header building).
func sendAsIs(*sipgo.Client, *sip.Request) error { return nil }

// ackLeg ACKs the 2xx that answered a B leg's INVITE (sipgo's Ack, with
// the ACK kept for the 2xx's retransmissions).
func (b *B2BUA) ackLeg(ctx context.Context, sess *sipgo.DialogClientSession) error {
	to := sess.InviteRequest.Recipient
	if ct := sess.InviteResponse.Contact(); ct != nil {
		to = ct.Address
	}
	ack := sip.NewRequest(sip.ACK, *to.Clone())
	if ct := sess.InviteRequest.Contact(); ct != nil {
		ack.AppendHeader(sip.HeaderClone(ct))
	}
	if err := sess.WriteAck(ctx, ack); err != nil {
		return err
	}
	b.acks.keep(ack)
	return nil
}
