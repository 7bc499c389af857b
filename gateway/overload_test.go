package gateway

import (
	"fmt"
	"hash/crc32"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/overload"
	"github.com/outpost/outpost/gateway/siptest"
	"github.com/outpost/outpost/siptarget"
)

// pstnCall starts a server with a PSTN gateway (a UDP socket of the test:
// its INVITEs are trusted) whose DIDs +1555NNNN reach extension NNNN, and
// a phone registered as 1001; before runs before the server does.
func pstnCall(t testing.TB, before ...func(*Server)) (s *Server, gw, callee *phone) {
	t.Helper()
	gwConn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gwConn.Close() })
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.PSTN = []PSTNGateway{{Name: "gw", Target: siptarget.MustParse("udp:"+gwConn.LocalAddr().String(), siptarget.UDP)}}
	cfg.Dialplan = dialplan.Config{Inbound: []dialplan.Inbound{{Match: `^\+1555(\d{4})$`, To: "$1"}}, Extensions: []string{"1001", "1002"}}
	s = startServer(t, cfg, before...)
	srv, _ := net.ResolveUDPAddr("udp", strings.TrimPrefix(s.Listeners()[0], "udp:"))
	gw = &phone{t: t, conn: gwConn, to: srv}
	callee = newPhone(t, s.Listeners()[0])
	callee.registerAs1001()
	return s, gw, callee
}

// While the box sheds, a new call gets a stateless 503 with Retry-After,
// and its retransmission the same answer; the call the box admitted before
// goes on: the retransmission of its INVITE is absorbed by its transaction
// (no 503), the callee's answer reaches the caller, and ACK and BYE work.
// When the gate clears, new calls are admitted again. Over UDP, from a
// PSTN gateway (trusted, no digest), to a registered phone.
func TestOverloadShedsNewCallsKeepsAdmitted(t *testing.T) {
	clock := siptest.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	g := overload.NewWith(clock.Now, func() uint64 { return 0 })
	s, gw, callee := pstnCall(t, func(s *Server) { s.overload = g })

	// The admitted call rings at 1001.
	first := gw.newInvite("ov-1", "z9hG4bK-ov1", "+15551001")
	gw.send(first)
	bleg := callee.readRequest("INVITE")
	callee.send(reply(bleg, "180 Ringing", "cl1"))
	gw.readStatus("180")
	if g.Observed() == 0 {
		t.Fatal("the admitted INVITE's queueing delay was not observed")
	}

	// Overload: in the next interval every setup was slow.
	clock.Advance(overload.Interval)
	g.Observe(time.Second)
	clock.Advance(overload.Interval)
	if q, _ := g.Shedding(); !q {
		t.Fatal("gate not shedding")
	}
	gw.send(first) // retransmission of the admitted INVITE
	shed := gw.newInvite("ov-2", "z9hG4bK-ov2", "+15551002")
	gw.send(shed)
	res := gw.readStatus("503")
	if header(res, "Retry-After") != overload.RetryAfter || !strings.Contains(header(res, "Call-ID"), "ov-2") {
		t.Fatalf("shed call's answer:\n%s", res)
	}
	gw.send(shed)
	if again := gw.readStatus("503"); header(again, "To") != header(res, "To") {
		t.Fatalf("retransmission answered with To %q, then %q", header(res, "To"), header(again, "To"))
	}
	if q, m := s.OverloadRefusals(); q != 2 || m != 0 {
		t.Fatalf("OverloadRefusals queue %d, memory %d; want 2, 0", q, m)
	}

	// The admitted call is answered, ACKed and hung up through the box.
	callee.send(reply(bleg, "200 OK", "cl1"))
	ok := gw.readStatus("200")
	if !strings.Contains(header(ok, "Call-ID"), "ov-1") {
		t.Fatalf("200 of another call:\n%s", ok)
	}
	gw.send(inDialog("ACK", ok, gw, 1))
	callee.readRequest("ACK")
	gw.send(inDialog("BYE", ok, gw, 2))
	bye := callee.readRequest("BYE")
	callee.send(reply(bye, "200 OK", "cl1"))
	gw.readStatus("200")

	// The gate clears (an interval without admitted setups): new calls
	// are admitted (1002 is not registered: the B2BUA's 480).
	clock.Advance(2 * overload.Interval)
	gw.send(gw.newInvite("ov-3", "z9hG4bK-ov3", "+15551002"))
	if res := gw.readStatus("480"); res == "" {
		t.Fatal("no 480")
	}
}

// newInvite is an INVITE from the PSTN gateway socket to DID, with an offer.
func (p *phone) newInvite(callID, branch, did string) string {
	port := p.conn.LocalAddr().(*net.UDPAddr).Port
	sdp := fmt.Sprintf("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio %d RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n", port+1)
	return fmt.Sprintf("INVITE sip:%s@%s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=%s;rport\r\n"+
		"From: <sip:+15550000@127.0.0.1>;tag=f-%s\r\nTo: <sip:%s@%s>\r\nCall-ID: %s\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\n"+
		"Contact: <sip:gw@127.0.0.1:%d>\r\nContent-Type: application/sdp\r\nContent-Length: %d\r\n\r\n%s",
		did, p.to, port, branch, callID, did, p.to, callID, port, len(sdp), sdp)
}

// readStatus reads until a response with the status code (a prefix of
// it), skipping others (100 Trying, retransmitted provisionals).
func (p *phone) readStatus(code string) string {
	p.t.Helper()
	for range 20 {
		res := p.read()
		if strings.HasPrefix(res, "SIP/2.0 "+code) {
			return res
		}
		if !strings.HasPrefix(res, "SIP/2.0 1") {
			p.t.Fatalf("want %s, got:\n%s", code, res)
		}
	}
	p.t.Fatalf("no %s", code)
	return ""
}

// readRequest reads until a request of the method, skipping others.
func (p *phone) readRequest(method string) string {
	p.t.Helper()
	for range 20 {
		if req := p.read(); strings.HasPrefix(req, method+" ") {
			return req
		}
	}
	p.t.Fatalf("no %s", method)
	return ""
}

// reply answers a request in wire text with status ("200 OK"), adding
// the To tag and, for an INVITE's 200, an answer.
func reply(req, status, tag string) string {
	var b strings.Builder
	b.WriteString("SIP/2.0 " + status + "\r\n")
	for _, h := range []string{"Via", "From", "Call-ID", "CSeq"} {
		b.WriteString(h + ": " + header(req, h) + "\r\n")
	}
	to := header(req, "To")
	if !strings.Contains(to, "tag=") {
		to += ";tag=" + tag
	}
	b.WriteString("To: " + to + "\r\nContact: <sip:1001@127.0.0.1>\r\n")
	if strings.HasPrefix(req, "INVITE ") && strings.HasPrefix(status, "200") {
		sdp := "v=0\r\no=- 2 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
		fmt.Fprintf(&b, "Content-Type: application/sdp\r\nContent-Length: %d\r\n\r\n%s", len(sdp), sdp)
		return b.String()
	}
	return b.String() + "Content-Length: 0\r\n\r\n"
}

// inDialog is an ACK or BYE from the caller p in the dialog of the 2xx;
// its branch is unique to the method, CSeq and call.
func inDialog(method, ok string, p *phone, cseq int) string {
	port := p.conn.LocalAddr().(*net.UDPAddr).Port
	target := strings.Trim(header(ok, "Contact"), "<>")
	if i := strings.IndexByte(target, '>'); i >= 0 {
		target = target[:i]
	}
	n := cseq
	if method == "ACK" {
		n = 1
	}
	callID := header(ok, "Call-ID")
	return fmt.Sprintf("%s %s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:%d;branch=z9hG4bK-%s%d-%x\r\nFrom: %s\r\nTo: %s\r\n"+
		"Call-ID: %s\r\nCSeq: %d %s\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		method, target, port, strings.ToLower(method), cseq, crc32.ChecksumIEEE([]byte(callID)), header(ok, "From"), header(ok, "To"), callID, n, method)
}
