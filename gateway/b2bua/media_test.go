package b2bua

import (
	"strings"
	"testing"
)

// TestOutSDPOrigin: the o= a party sees keeps its origin across a change
// of the other party (RFC 3264 §8), read and written with sdprewrite.
func TestOutSDPOrigin(t *testing.T) {
	crlf := func(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n" }
	fromB := crlf("v=0", "o=b 2 2 IN IP4 198.18.1.2", "s=-", "c=IN IP4 198.18.1.2", "t=0 0", "m=audio 41000 RTP/AVP 0")
	// A new party (a transfer) with sloppy SDP: LF only, no final newline,
	// a host name in o=.
	fromC := "v=0\no=c 5 9 IN IP4 pbx.example.com\ns=-\nc=IN IP4 198.18.1.3\nt=0 0\nm=audio 42000 RTP/AVP 0"
	fromC2 := strings.Replace(fromC, "o=c 5 9 ", "o=c 5 10 ", 1)
	asB := func(ver string) string {
		return crlf("v=0", "o=b 2 "+ver+" IN IP4 198.18.1.2", "s=-", "c=IN IP4 198.18.1.3", "t=0 0", "m=audio 42000 RTP/AVP 0")
	}
	var oa offerAnswer
	steps := []struct{ in, want string }{
		{fromB, fromB},                       // first description: untouched
		{fromB, fromB},                       // repeated: untouched
		{fromC, asB("3")},                    // other origin: B's, version + 1, CRLF
		{fromC, asB("3")},                    // the same description again keeps its version
		{fromC2, asB("4")},                   // changed: version + 1
		{"v=0\r\ns=-\r\n", "v=0\r\ns=-\r\n"}, // no o=: untouched
		{"v=0\no=c 5 11 IN IP4\n", "v=0\no=c 5 11 IN IP4\n"}, // malformed o= (five fields): untouched
	}
	for i, st := range steps {
		s, ok := readSDP([]byte(st.in))
		if got := string(oa.prepare([]byte(st.in), s, ok)); got != st.want {
			t.Errorf("step %d: got\n%s\nwant\n%s", i, got, st.want)
		}
	}
}

func TestWithSendrecv(t *testing.T) {
	held := "v=0\no=a 1 2 IN IP4 198.18.1.1\ns=-\nc=IN IP4 198.18.1.1\nt=0 0\nm=audio 40000 RTP/AVP 0\na=recvonly\n"
	want := "v=0\r\no=a 1 2 IN IP4 198.18.1.1\r\ns=-\r\nc=IN IP4 198.18.1.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=sendrecv\r\n"
	if got := string(withSendrecv([]byte(held))); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	for _, in := range []string{"", strings.Replace(held, "a=recvonly", "a=sendrecv", 1)} {
		if got := string(withSendrecv([]byte(in))); got != in {
			t.Errorf("changed %q into %q", in, got)
		}
	}
}
