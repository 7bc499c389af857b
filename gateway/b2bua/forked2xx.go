package b2bua

import (
	"github.com/emiago/sipgo/sip"
)

// endFork ACKs the 2xx res from another fork of an INVITE whose first
// 2xx won, and ends the fork's dialog with a BYE (RFC 3261 §13.2.2.4).
// won is the ACK kept for the winner: the fork's requests leave the way
// the INVITE did. The BYE runs on its own goroutine, bounded by
// byeTimeout.
func (b *B2BUA) endFork(res *sip.Response, won sentAck) {
	p := forkParty(b, res, won)
	if p == nil {
		b.log.Debug("b2bua: 2xx of another fork without Contact", "from", res.Source())
		return
	}
	p.ackNow(p.inviteCSeq, nil, "")
	b.inflight.Add(1)
	go func() {
		defer b.inflight.Add(-1)
		p.bye()
	}()
}

// forkParty is the dialog the 2xx res from another fork set up (RFC 3261
// §12.1.2: its Contact, its Record-Route reversed), confirmed at once: it
// is only ever ACKed and ended. Nil when res has no Contact.
func forkParty(b *B2BUA, res *sip.Response, won sentAck) *party {
	from, to, ct, cs := res.From(), res.To(), res.Contact(), res.CSeq()
	if from == nil || to == nil || ct == nil || cs == nil {
		return nil
	}
	d := dialog{transport: won.transport, dest: res.Source(), callID: res.CallID().Value(),
		local: *from, remote: *to, routes: uacRoutes(res), inviteCSeq: cs.SeqNo}
	if won.laddr.IP != nil {
		d.laddr = &won.laddr
	}
	d.local.Params = from.Params.Clone()
	d.remote.Params = to.Params.Clone()
	p := newParty(b, loneHome(b), d)
	p.name = "fork " + res.Source()
	p.confirm()
	p.rem.target = *ct.Address.Clone()
	p.cseq.Store(cs.SeqNo)
	return p
}
