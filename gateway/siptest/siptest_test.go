package siptest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/digest"
)

// A UA answers over both its loopback transports, to a sipgo client and
// to a Peer's wire text.
func TestUAServesUDPAndTCP(t *testing.T) {
	u := NewUA(t)
	u.Server.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	})
	udp, tcp := u.ListenUDP(), u.ListenTCP()
	c := NewUA(t).Client()
	for _, tc := range []struct{ transport, addr string }{{"UDP", udp}, {"TCP", tcp}} {
		req := sip.NewRequest(sip.OPTIONS, sip.Uri{Scheme: "sip", Host: "box.test"})
		req.SetTransport(tc.transport)
		req.SetDestination(tc.addr)
		if res := Do(t, c, req); res.StatusCode != 200 {
			t.Fatalf("%s OPTIONS: %v", tc.transport, res)
		}
	}
	p := NewPeer(t, "udp:"+udp)
	p.Send(Wire("OPTIONS sip:box.test SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK-p;rport", "From: <sip:a@test>;tag=1",
		"To: <sip:box.test>", "Call-ID: peer-1", "CSeq: 1 OPTIONS"))
	if res := p.Read(); !strings.HasPrefix(res, "SIP/2.0 200") || Header(res, "call-id") != "peer-1" {
		t.Fatalf("Peer got %q", res)
	}
}

// Answer's credentials verify with gateway/digest, for the algorithm
// asked and the nonce count given.
func TestAnswer(t *testing.T) {
	a, err := digest.New(digest.Config{Realm: "r.test"})
	if err != nil {
		t.Fatal(err)
	}
	wire := "SIP/2.0 401 Unauthorized\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK-a\r\nFrom: <sip:a@r.test>;tag=1\r\nTo: <sip:a@r.test>\r\nCall-ID: c\r\nCSeq: 1 REGISTER\r\n"
	for _, c := range a.Challenges(false) {
		wire += "WWW-Authenticate: " + c + "\r\n"
	}
	wire += "Content-Length: 0\r\n\r\n"
	lookup := func(user string, alg digest.Algorithm) (string, bool) {
		return digest.HA1(alg, "a", "r.test", "pw"), user == "a"
	}
	// One nonce for both algorithms: each answer needs a new count.
	for i, alg := range []string{"MD5", "SHA-256"} {
		v := AnswerText(t, wire, Creds{User: "a", Password: "pw", Method: "REGISTER", URI: "sip:r.test", Algorithm: alg, NC: 3 + i})
		cr, err := digest.ParseCredentials(v)
		if err != nil || !strings.EqualFold(string(cr.Algorithm), alg) || cr.NC != fmt.Sprintf("%08x", 3+i) {
			t.Fatalf("%s: %+v %v", alg, cr, err)
		}
		if res := a.Verify("REGISTER", &cr, lookup); res != digest.OK {
			t.Fatalf("%s: Verify = %v", alg, res)
		}
	}
}

func TestWireAndRoundTrip(t *testing.T) {
	req := Parse[*sip.Request](t, Wire("REGISTER sip:r.test SIP/2.0", "Via: SIP/2.0/UDP h;branch=z9hG4bK-w", "From: <sip:a@r.test>;tag=1",
		"To: <sip:a@r.test>", "Call-ID: w", "CSeq: 1 REGISTER"))
	back, err := RoundTrip(req)
	if err != nil || back.CallID().Value() != "w" || back.ContentLength() == nil {
		t.Fatalf("RoundTrip: %v %v", back, err)
	}
}
