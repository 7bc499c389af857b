package registrar

import (
	"testing"

	"github.com/emiago/sipgo/sip"
)

// Every answer to a REGISTER says its body is empty: RFC 3261 §20.14
// requires Content-Length over TCP and TLS, and libre (baresip) drops a
// connection whose answer has none.
func TestRegisterAnswerHasContentLength(t *testing.T) {
	msg := "REGISTER sip:box SIP/2.0\r\nVia: SIP/2.0/TCP 192.0.2.1:5060;branch=z9hG4bK-cl\r\n" +
		"From: <sip:1001@box>;tag=1\r\nTo: <sip:1001@box>\r\nCall-ID: cl-1\r\nCSeq: 1 REGISTER\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
	m, err := sip.ParseMessage([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	res := reply(m.(*sip.Request), 401, "Unauthorized")
	if h := res.ContentLength(); h == nil || *h != 0 {
		t.Fatalf("answer without Content-Length: 0:\n%s", res.String())
	}
}
