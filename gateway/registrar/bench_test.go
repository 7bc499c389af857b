package registrar

import (
	"fmt"
	"testing"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/siptest"
)

// BenchmarkRegister measures one whole registration inside the registrar
// (REGISTER → 401, REGISTER with credentials → 200) over 1000 users,
// without transport: parsing of the two requests is included, as the
// gateway's fast path does it on the socket's goroutine. So is the client's
// side (computing the digest answer, ~2 µs), since stopping the timer per
// iteration would cost more than it hides.
func BenchmarkRegister(b *testing.B) {
	users := make([]User, 1000)
	for i := range users {
		users[i] = user(fmt.Sprintf("user%04d", i), fmt.Sprintf("pw%04d", i))
	}
	r, err := New(Config{Realm: realm, Users: users, StormRate: -1}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	first := make([][]byte, len(users))
	for i := range users {
		first[i] = []byte(fmt.Sprintf("REGISTER sip:%[2]s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bK-%[1]d\r\n"+
			"From: <sip:user%04[1]d@%[2]s>;tag=t%[1]d\r\nTo: <sip:user%04[1]d@%[2]s>\r\nCall-ID: c%[1]d\r\nCSeq: 1 REGISTER\r\n"+
			"Contact: <sip:user%04[1]d@127.0.0.1:5080;transport=UDP>\r\nExpires: 3600\r\nContent-Length: 0\r\n\r\n", i, realm))
	}
	parse := func(data []byte) *sip.Request {
		m, err := sip.ParseMessage(data)
		if err != nil {
			b.Fatal(err)
		}
		req := m.(*sip.Request)
		req.SetSource("127.0.0.1:5080")
		req.SetTransport("UDP")
		return req
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		i := n % len(users)
		req := parse(first[i])
		res := r.HandleRegister(req, "udp:127.0.0.1:5060")
		if res.StatusCode != 401 {
			b.Fatalf("first: %d", res.StatusCode)
		}
		authz := siptest.Answer(b, res, siptest.Creds{User: fmt.Sprintf("user%04d", i), Password: fmt.Sprintf("pw%04d", i), Method: "REGISTER", URI: "sip:" + realm})
		second := fmt.Sprintf("REGISTER sip:%[2]s SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bK-%[1]d-2\r\n"+
			"From: <sip:user%04[1]d@%[2]s>;tag=t%[1]d\r\nTo: <sip:user%04[1]d@%[2]s>\r\nCall-ID: c%[1]d-%[3]d\r\nCSeq: 2 REGISTER\r\n"+
			"Contact: <sip:user%04[1]d@127.0.0.1:5080;transport=UDP>\r\nAuthorization: %[4]s\r\nExpires: 3600\r\nContent-Length: 0\r\n\r\n", i, realm, n, authz)
		req = parse([]byte(second))
		if res := r.HandleRegister(req, "udp:127.0.0.1:5060"); res.StatusCode != 200 {
			b.Fatalf("second: %d %s", res.StatusCode, res.Reason)
		}
	}
}
