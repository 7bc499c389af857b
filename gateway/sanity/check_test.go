package sanity

import (
	"strings"
	"testing"

	"github.com/emiago/sipgo/sip"
)

func TestCheckRequest(t *testing.T) {
	const base = "OPTIONS sip:u@example.com SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1\r\n" +
		"From: <sip:a@example.com>;tag=1\r\nTo: <sip:u@example.com>\r\nCall-ID: c1\r\nCSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\n"
	for _, tc := range []struct {
		name  string
		msg   string
		want  int // 0 = passes
		extra string
	}{
		{"plain", base, 0, ""},
		{"unknown scheme", strings.Replace(base, "sip:u@example.com SIP", "nobody:opaque SIP", 1), 416, ""},
		{"headers in request-uri", strings.Replace(base, "sip:u@example.com SIP", "sip:u@example.com?Route=%3Csip:x%3E SIP", 1), 400, ""},
		{"two call-ids", base + "Call-ID: c2\r\n", 400, ""},
		{"two tos, one compact", base + "t: <sip:v@example.com>\r\n", 400, "Multiple To"},
		{"two max-forwards", base + "max-forwards: 69\r\n", 400, "Multiple Max-Forwards"},
		{"two content-lengths", base + "Content-Length: 0\r\nl: 0\r\n\r\n", 400, "Multiple Content-Length"},
		{"cseq mismatch", strings.Replace(base, "CSeq: 1 OPTIONS", "CSeq: 1 INVITE", 1), 400, ""},
		{"bad date", base + "Date: Fri, 01 Jan 2010 16:00:00 EST\r\n", 400, ""},
		{"good date", base + "Date: Fri, 01 Jan 2010 16:00:00 GMT\r\n", 0, ""},
		{"require", base + "Require: foo, bar\r\n", 420, "foo, bar"},
		// RFC 3262 and RFC 4028: an INVITE may require 100rel and timer,
		// other methods neither (UPDATE: timer only).
		{"require 100rel", strings.Replace(base, "OPTIONS", "INVITE", 2) + "Require: 100rel, timer\r\n", 0, ""},
		{"require 100rel and more", strings.Replace(base, "OPTIONS", "INVITE", 2) + "Require: 100rel, foo\r\n", 420, "Unsupported: foo"},
		{"options require timer", base + "Require: timer\r\n", 420, "Unsupported: timer"},
		{"update require 100rel", strings.Replace(base, "OPTIONS", "UPDATE", 2) + "Require: timer, 100rel\r\n", 420, "Unsupported: 100rel"},
		{"supported 100rel", strings.Replace(base, "OPTIONS", "INVITE", 2) + "Supported: 100rel, timer\r\n", 0, ""},
		{"invite unknown body", strings.Replace(base, "OPTIONS", "INVITE", 2) + "Content-Type: application/unknown\r\nContent-Length: 3\r\n\r\nabc", 415, "application/sdp"},
		{"invite sdp", strings.Replace(base, "OPTIONS", "INVITE", 2) + "Content-Type: application/sdp\r\nContent-Length: 3\r\n\r\nv=0", 0, ""},
		{"invite accept no sdp", strings.Replace(base, "OPTIONS", "INVITE", 2) + "Accept: text/nobodyknowsthis\r\n", 406, ""},
		{"invite accept sdp", strings.Replace(base, "OPTIONS", "INVITE", 2) + "Accept: text/plain, application/sdp;q=0.5\r\n", 0, ""},
	} {
		msg := tc.msg
		if !strings.Contains(msg, "\r\n\r\n") {
			msg += "Content-Length: 0\r\n\r\n"
		}
		m, err := sip.ParseMessage([]byte(msg))
		if err != nil {
			t.Fatalf("%s: parse: %v", tc.name, err)
		}
		res := Check(m.(*sip.Request))
		switch {
		case tc.want == 0 && res != nil:
			t.Errorf("%s: refused %d %s", tc.name, res.StatusCode, res.Reason)
		case tc.want != 0 && (res == nil || res.StatusCode != tc.want):
			t.Errorf("%s: %v, want %d", tc.name, res, tc.want)
		case tc.extra != "" && !strings.Contains(res.String(), tc.extra):
			t.Errorf("%s: %q lacks %q", tc.name, res.String(), tc.extra)
		}
	}
}

// An Authorization of an unknown scheme is dropped so the registrar
// challenges (RFC 4475 §3.3.7); a Digest one is kept.
func TestCheckRequestUnknownAuthScheme(t *testing.T) {
	for scheme, kept := range map[string]bool{"NoOneKnowsThisScheme opaque-data=here": false, `Digest username="a"`: true} {
		m, err := sip.ParseMessage([]byte("REGISTER sip:example.com SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1\r\n" +
			"From: <sip:a@example.com>;tag=1\r\nTo: <sip:a@example.com>\r\nCall-ID: c1\r\nCSeq: 1 REGISTER\r\n" +
			"Authorization: " + scheme + "\r\nContent-Length: 0\r\n\r\n"))
		if err != nil {
			t.Fatal(err)
		}
		req := m.(*sip.Request)
		if res := Check(req); res != nil {
			t.Fatalf("%s: refused %d", scheme, res.StatusCode)
		}
		if got := req.GetHeader("Authorization") != nil; got != kept {
			t.Errorf("%s: Authorization kept = %v", scheme, got)
		}
	}
}
