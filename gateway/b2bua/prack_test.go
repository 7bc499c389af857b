package b2bua

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// TestCalleeReliableProvisionalPracked: RFC 3262 — the callee answers
// with a reliable 183 carrying its SDP (Require: 100rel, RSeq) and a
// retransmission of it, and a 2xx without SDP. The box PRACKs it itself
// (RAck: RSeq, the INVITE's CSeq), relays it once and unreliably to the
// caller, which only said Supported: 100rel, and gives the caller the
// callee's answer in the 2xx.
func TestCalleeReliableProvisionalPracked(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	// B answers once A has the 183: A is a sipgo client, which handles
	// each response on a goroutine of its own, so a 200 sent right behind
	// the 183 may be handled first and the 183 then dropped by A's
	// transaction (it failed a loaded CI run that way).
	seen183 := make(chan struct{}, 1)
	b := newPhone(t, "1002", func(p *phone, d *sipgo.DialogServerSession, req *sip.Request) {
		rel := []sip.Header{sip.NewHeader("Content-Type", "application/sdp"), sip.NewHeader("Require", "100rel"), sip.NewHeader("RSeq", "7")}
		for range 2 { // the 183 and a retransmission of it
			if err := d.Respond(183, "Session Progress", sdpB, rel...); err != nil {
				p.t.Errorf("183: %v", err)
				return
			}
		}
		var pr *sip.Request
		select {
		case pr = <-p.pracks:
		case <-time.After(wait):
			p.t.Error("no PRACK at B")
			return
		}
		if got, want := header(pr, "RAck"), "7 "+itoa(req.CSeq().SeqNo)+" INVITE"; got != want {
			p.t.Errorf("PRACK has RAck %q, want %q", got, want)
		}
		if pr.CSeq().SeqNo <= req.CSeq().SeqNo {
			p.t.Errorf("PRACK CSeq %d not above the INVITE's %d", pr.CSeq().SeqNo, req.CSeq().SeqNo)
		}
		select {
		case <-seen183:
		case <-time.After(wait):
			p.t.Error("A did not get the 183")
		}
		p.answeredWithB()
		if err := d.Respond(200, "OK", nil); err != nil { // the answer was in the 183
			p.t.Errorf("200: %v", err)
			return
		}
		p.answered <- d
	})
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	var mu sync.Mutex
	var got183 []*sip.Response
	oc := a.dialWith(ctx, e.box, "1002", []sip.Header{sip.NewHeader("Supported", "100rel")}, func(r *sip.Response) {
		if r.StatusCode == 183 {
			mu.Lock()
			got183 = append(got183, r)
			mu.Unlock()
			select {
			case seen183 <- struct{}{}:
			default:
			}
		}
	})
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200", oc.final, oc.err)
	}
	inv := recv(t, b.invites, "INVITE at B")
	if !hasOption(inv, "100rel", "Supported") {
		t.Errorf("INVITE to B lacks Supported: 100rel: %q", header(inv, "Supported"))
	}
	mu.Lock()
	if len(got183) != 1 {
		t.Errorf("A got %d 183s, want 1 (a retransmission is not relayed)", len(got183))
	} else if r := got183[0]; r.GetHeader("RSeq") != nil || hasOption(r, "100rel", "Require") || !strings.Contains(string(r.Body()), "o=b 2 2") {
		t.Errorf("183 to A: want it unreliable with B's SDP:\n%s", r)
	}
	mu.Unlock()
	if body := string(oc.sess.InviteResponse.Body()); !strings.Contains(body, "o=b 2 2") {
		t.Errorf("2xx to A lacks B's early answer: %q", body)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "answer at B")
	recv(t, b.acks, "ACK at B")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestCallerRequires100rel: RFC 3262 §3 — a caller whose INVITE has
// Require: 100rel gets the callee's 180 reliably (Require: 100rel, RSeq),
// retransmitted until its PRACK; a PRACK naming another RSeq gets 481,
// the right one 200, and the call goes on to its answer.
func TestCallerRequires100rel(t *testing.T) {
	e := newEnv(t, Config{})
	release := make(chan struct{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringUntil(release))
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)

	type prackResult struct{ wrong, right int }
	results := make(chan prackResult, 1)
	var mu sync.Mutex
	seen := 0
	oc := a.dialWith(ctx, e.box, "1002", []sip.Header{sip.NewHeader("Require", "100rel"), sip.NewHeader("Supported", "100rel")}, func(r *sip.Response) {
		if r.StatusCode != 180 {
			return
		}
		mu.Lock()
		seen++
		n := seen
		mu.Unlock()
		if !hasOption(r, "100rel", "Require") || r.GetHeader("RSeq") == nil {
			t.Errorf("180 to A is not reliable:\n%s", r)
			return
		}
		if n != 2 {
			return // PRACK only once the box has retransmitted it
		}
		go func() {
			rseq := header(r, "RSeq")
			wrong := sendPrack(ctx, t, a, r, 1, "999999999")
			right := sendPrack(ctx, t, a, r, 2, rseq)
			results <- prackResult{wrong, right}
			close(release)
		}()
	})
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("A got %d (%v), want 200", oc.final, oc.err)
	}
	res := recv(t, results, "PRACK answers")
	if res.wrong != 481 || res.right != 200 {
		t.Errorf("PRACK answers: unknown RSeq %d, right RSeq %d; want 481, 200", res.wrong, res.right)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "answer at B")
	recv(t, b.acks, "ACK at B")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// sendPrack sends a PRACK from phone p for reliable provisional r (RAck:
// rseq and the INVITE's CSeq, which r carries), with CSeq the INVITE's +
// n, and returns the status.
func sendPrack(ctx context.Context, t *testing.T, p *phone, r *sip.Response, n uint32, rseq string) int {
	req := sip.NewRequest(sip.PRACK, *r.Contact().Address.Clone())
	req.AppendHeader(sip.HeaderClone(r.From()))
	req.AppendHeader(sip.HeaderClone(r.To()))
	req.AppendHeader(sip.HeaderClone(r.CallID()))
	req.AppendHeader(&sip.CSeqHeader{SeqNo: r.CSeq().SeqNo + n, MethodName: sip.PRACK})
	req.AppendHeader(sip.NewHeader("RAck", rseq+" "+itoa(r.CSeq().SeqNo)+" INVITE"))
	req.SetDestination(r.Source())
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	res, err := p.cli.Do(ctx, req)
	if err != nil {
		t.Errorf("PRACK: %v", err)
		return 0
	}
	return res.StatusCode
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
