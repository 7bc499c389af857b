package registrar

import (
	"testing"

	"github.com/emiago/sipgo/sip"
)

// FuzzHandleRegister feeds arbitrary bytes through sipgo's parser into the
// registrar: whatever parses must be answered (never a panic, never a nil
// response), and only with a status the registrar is meant to send.
func FuzzHandleRegister(f *testing.F) {
	for _, s := range []string{
		"REGISTER sip:test.local SIP/2.0\r\nVia: SIP/2.0/UDP 198.18.0.10:5060;branch=z9hG4bK1\r\nFrom: <sip:1001@test.local>;tag=a\r\nTo: <sip:1001@test.local>\r\nCall-ID: c1\r\nCSeq: 1 REGISTER\r\nContact: <sip:1001@198.18.0.10>;expires=60\r\nContent-Length: 0\r\n\r\n",
		"REGISTER sip:test.local SIP/2.0\r\nVia: SIP/2.0/UDP 198.18.0.10:5060;branch=z9hG4bK2\r\nFrom: <sip:1001@test.local>;tag=a\r\nTo: <sip:1001@test.local>\r\nCall-ID: c1\r\nCSeq: 2 REGISTER\r\nContact: *\r\nExpires: 0\r\nAuthorization: Digest username=\"1001\", realm=\"test.local\", nonce=\"abc\", uri=\"sip:test.local\", response=\"00000000000000000000000000000000\", qop=auth, nc=00000001, cnonce=\"x\"\r\nContent-Length: 0\r\n\r\n",
		"REGISTER sip:test.local SIP/2.0\r\nVia: SIP/2.0/TCP 198.18.0.10:5060;branch=z9hG4bK3\r\nFrom: <sip:1002@test.local>;tag=a\r\nTo: \"Bob\" <sip:1002@test.local>\r\nCall-ID: c2\r\nCSeq: 7 REGISTER\r\nContact: <sip:1002@198.18.0.20>;q=0.5, <sip:1002@198.18.0.21>;+sip.instance=\"<urn:uuid:1>\";reg-id=1\r\nExpires: 30\r\nContent-Length: 0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	users := []User{user("1001", "pw1001"), user("1002", "pw1002")}
	r, err := New(Config{Realm: realm, Users: users, StormRate: -1}, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[int]bool{200: true, 400: true, 401: true, 403: true, 423: true, 500: true, 503: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := sip.ParseMessage(data)
		if err != nil {
			return
		}
		req, ok := m.(*sip.Request)
		if !ok || req.Method != sip.REGISTER {
			return
		}
		req.SetSource("198.18.0.10:5060")
		req.SetTransport("UDP")
		res := r.HandleRegister(req, "udp:127.0.0.1:5060")
		if res == nil || !allowed[res.StatusCode] {
			t.Fatalf("response %v to\n%q", res, data)
		}
	})
}
