package b2bua

import (
	"context"
	"strconv"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// Message waiting (RFC 3842) for the box's voicemail: a phone subscribes
// to its own user's message-summary and gets a NOTIFY at once and at each
// change (a new, heard or deleted message: MailboxChanged); a phone that
// does not subscribe gets the same body in an unsolicited NOTIFY (outside
// any dialog, as Asterisk, FreeSWITCH and Cisco send it, which phones take
// by default) at each change and when it registers. Only a user's own
// mailbox may be watched (another's: 403).

const eventMessageSummary = "message-summary"

// summaryBody is the message-summary body of mailbox account.
func summaryBody(account string, newMsgs, oldMsgs int) string {
	waiting := "no"
	if newMsgs > 0 {
		waiting = "yes"
	}
	return "Messages-Waiting: " + waiting + "\r\nMessage-Account: " + account + "\r\nVoice-Message: " +
		strconv.Itoa(newMsgs) + "/" + strconv.Itoa(oldMsgs) + "\r\n"
}

// waiting is mailbox's count, zero without a voicemail.
func (b *B2BUA) waiting(mailbox string) (int, int) {
	set := b.current().Settings
	if set == nil || set.cfg.Voicemail == nil {
		return 0, 0
	}
	return set.cfg.Voicemail.Waiting(mailbox)
}

// MailboxChanged says that mailbox's messages changed: its subscribers
// get a NOTIFY, and its phones that do not subscribe an unsolicited one.
func (b *B2BUA) MailboxChanged(mailbox string) {
	b.watchedChanged(mailbox)
	if !b.summarySubscribed(mailbox) {
		b.goUnsolicitedMWI(mailbox)
	}
}

// PhoneRegistered tells the B2BUA that a phone of user registered: a user
// with messages waiting gets its lamp lit (unsolicited, when no phone of
// the user subscribes).
func (b *B2BUA) PhoneRegistered(user string) {
	if n, _ := b.waiting(user); n > 0 && !b.summarySubscribed(user) {
		b.goUnsolicitedMWI(user)
	}
}

// goUnsolicitedMWI sends mailbox's unsolicited NOTIFYs off the caller's
// path (a registration, the voicemail's deposit).
func (b *B2BUA) goUnsolicitedMWI(mailbox string) {
	b.inflight.Add(1)
	go func() {
		defer b.inflight.Add(-1)
		b.unsolicitedMWI(mailbox)
	}()
}

// summarySubscribed reports whether some phone subscribes to user's
// message summary.
func (b *B2BUA) summarySubscribed(user string) bool {
	w := &b.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.subs {
		if s.event == eventMessageSummary && s.target == user {
			return true
		}
	}
	return false
}

// unsolicitedMWI sends mailbox's summary to each of its phones.
func (b *B2BUA) unsolicitedMWI(mailbox string) {
	set := b.current().Settings
	if set == nil || set.cfg.Voicemail == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), messageTimeout)
	defer cancel()
	ts, err := b.targets(ctx, set, dialplan.Decision{Route: dialplan.RouteLocal, Target: mailbox})
	if ts = reachable(ts); err != nil || len(ts) == 0 {
		return
	}
	n, o := set.cfg.Voicemail.Waiting(mailbox)
	for _, t := range ts {
		req := mwiTo(set, mailbox, t, n, o)
		if res, err := b.client.Do(ctx, req); err != nil || res.StatusCode >= 300 {
			b.log.Debug("b2bua: unsolicited MWI not taken", "user", mailbox, "contact", t.uri.String(), "err", err)
		}
	}
}

// mwiTo is the unsolicited NOTIFY of mailbox's summary to contact t.
func mwiTo(set *Settings, mailbox string, t target, n, o int) *sip.Request {
	req := messageTo(set, outMessage{sender: mailbox, ctype: "application/simple-message-summary", maxFwd: 70}, t)
	req.Method = sip.NOTIFY
	req.CSeq().MethodName = sip.NOTIFY
	account := "sip:" + mailbox + "@" + req.From().Address.Host
	req.AppendHeader(sip.NewHeader("Event", eventMessageSummary))
	req.AppendHeader(sip.NewHeader("Subscription-State", "active"))
	if laddr := t.laddr; laddr != nil {
		req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: mailbox, Host: laddr.IP.String(), Port: laddr.Port}})
	}
	req.SetBody([]byte(summaryBody(account, n, o)))
	return req
}
