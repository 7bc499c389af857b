package fastpath

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/emiago/sipgo/sip"
)

// sippRegister is SIPp's second REGISTER (bench/peers/sipp/reg_auth.xml).
const sippRegister = "REGISTER sip:bench.local SIP/2.0\r\n" +
	"Via: SIP/2.0/UDP 127.0.0.51:5080;branch=z9hG4bK-1-2-0\r\n" +
	"Max-Forwards: 70\r\n" +
	"From: <sip:user0001@bench.local>;tag=1t2\r\n" +
	"To: <sip:user0001@bench.local>\r\n" +
	"Call-ID: 2-1@127.0.0.51\r\n" +
	"CSeq: 2 REGISTER\r\n" +
	"Contact: <sip:user0001@127.0.0.51:5080;transport=UDP>\r\n" +
	`Authorization: Digest username="user0001",realm="bench.local",cnonce="6b8b4567",nc=00000001,qop=auth,uri="sip:bench.local",nonce="abc",response="0123456789abcdef0123456789abcdef",algorithm=MD5` + "\r\n" +
	"Expires: 3600\r\n" +
	"User-Agent: sipp-bench\r\n" +
	"Content-Length: 0\r\n\r\n"

// parseSeeds are plain requests (parsed by parsePlain) and others (handed
// to sipgo): compact forms, folding, commas, bodies, stray line ends.
var parseSeeds = []string{
	sippRegister,
	"OPTIONS sip:box SIP/2.0\r\nv: SIP/2.0/UDP 10.0.0.1;rport;branch=z9hG4bKx\r\nf: <sip:a@b>;tag=1\r\nt: sip:box\r\ni: x\r\nCSeq: 1 OPTIONS\r\nl: 0\r\n\r\n",
	"REGISTER sip:b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:1@b>;tag=1\r\nTo: <sip:1@b>\r\nCall-ID: c\r\nCSeq: 1 REGISTER\r\nContact: <sip:1@h>, <sip:1@i>\r\n\r\n",
	"REGISTER sip:b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: <sip:1@b>\r\n ;tag=1\r\nTo: <sip:1@b>\r\nCall-ID: c\r\nCSeq: 1 REGISTER\r\n\r\n",
	"REGISTER sip:b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nContent-Length: 3\r\n\r\nabc",
	"REGISTER sip:b SIP/2.0\r\nVia: SIP/2.0/UDP h\nFrom: x\r\n\r\n",
	"REGISTER * SIP/2.0\r\nVia: SIP/2.0/UDP h\r\n\r\n",
	"REGISTER sip:b SIP/2.0\r\nContact: *\r\nExpires: 0\r\nX-Long-Header-Name-Beyond-Thirty-Two: 1\r\n: empty\r\nK: outbound\r\n\r\n",
	"REGISTER sip:b SIP/2.0\r\nX-A-Header-Name-Longer-Than-Sixty-Four-Bytes-Which-Parse-Leaves-To-Sipgo: 1\r\n\r\n",
	"OPTIONS sip:b SIP/2.0 x\r\n\r\n",
	"REGISTER sip:b SIP/2.0\r\nCSeq: 1\r\n\r\n",
}

func TestParsePlainIsSipgos(t *testing.T) {
	plain := 0
	for _, s := range parseSeeds {
		if compareParse(t, []byte(s)) {
			plain++
		}
	}
	if plain < 3 {
		t.Errorf("only %d of the seeds took the plain parse", plain)
	}
}

// FuzzParseRequest checks that whatever parsePlain accepts, sipgo parses
// to the same request.
func FuzzParseRequest(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { compareParse(t, data) })
}

// compareParse reports whether parsePlain took data, failing the test if
// its request differs from sipgo's.
func compareParse(t *testing.T, data []byte) bool {
	t.Helper()
	var raw rawHeaders
	mine := parsePlain(data, &raw)
	if mine == nil {
		return false
	}
	msg, err := sip.ParseMessage(data)
	if err != nil {
		t.Fatalf("parsePlain took what sipgo refuses (%v):\n%q", err, data)
	}
	theirs, ok := msg.(*sip.Request)
	if !ok {
		t.Fatalf("parsePlain took a response:\n%q", data)
	}
	if mine.Method != theirs.Method || mine.SipVersion != theirs.SipVersion || mine.Recipient.String() != theirs.Recipient.String() ||
		!bytes.Equal(mine.Body(), theirs.Body()) {
		t.Fatalf("start line or body differ:\nmine   %s %s %s\nsipgo's %s %s %s", mine.Method, mine.Recipient.String(), mine.SipVersion, theirs.Method, theirs.Recipient.String(), theirs.SipVersion)
	}
	a, b := mine.Headers(), theirs.Headers()
	if len(a) != len(b) {
		t.Fatalf("%d headers, sipgo %d:\n%q", len(a), len(b), data)
	}
	for i := range a {
		if a[i].Name() != b[i].Name() || a[i].Value() != b[i].Value() || a[i].String() != b[i].String() {
			t.Fatalf("header %d: %q, sipgo %q", i, a[i].String(), b[i].String())
		}
	}
	// Each raw line is its header: alone in a request, sipgo parses it
	// to the same header.
	for i := 0; i < raw.n; i++ {
		if !bytes.Contains(data, []byte(raw.line[i]+"\r\n")) {
			t.Fatalf("raw line %q is not in the request", raw.line[i])
		}
		m, err := sip.ParseMessage([]byte("OPTIONS sip:x SIP/2.0\r\n" + raw.line[i] + "\r\n\r\n"))
		if err != nil {
			t.Fatalf("raw line %q alone: %v", raw.line[i], err)
		}
		hs := m.(*sip.Request).Headers()
		if len(hs) != 1 || hs[0].String() != raw.hdr[i].String() {
			t.Fatalf("raw line %q is not header %q", raw.line[i], raw.hdr[i].String())
		}
	}
	if mine.String() != theirs.String() {
		t.Fatalf("requests differ:\n%s\nsipgo:\n%s", mine.String(), theirs.String())
	}
	compareAnswer(t, mine, &raw) // changes mine (a To tag)
	return true
}

// compareAnswer checks that an answer carrying the request's own headers
// (as the registrar's do), written with their raw lines, reads back as
// sipgo's serialization of the same answer.
//
// Where sipgo does not read back what it writes (garbage such as
// "From: :0>" prints differently each time round), the raw line, which is
// what the client sent, is not compared.
func compareAnswer(t *testing.T, req *sip.Request, raw *rawHeaders) {
	t.Helper()
	if again, err := sip.ParseMessage([]byte(req.String())); err != nil || again.String() != req.String() {
		return
	}
	tagged, tag := tagTo(req)
	res := sip.NewResponse(200, "OK")
	for _, h := range req.Headers() {
		switch h.(type) {
		case *sip.ViaHeader, *sip.FromHeader, *sip.ToHeader, *sip.CallIDHeader, *sip.CSeqHeader:
			res.AppendHeader(h)
		}
	}
	res.AppendHeader(sip.NewHeader("Date", "Tue, 01 Dec 2026 18:00:00 GMT"))
	var buf bytes.Buffer
	writeAnswer(&buf, res, raw, tagged, tag)
	mine, err := sip.ParseMessage(buf.Bytes())
	if err != nil {
		t.Fatalf("answer does not parse (%v):\n%s", err, buf.Bytes())
	}
	theirs, err := sip.ParseMessage([]byte(res.String()))
	if err != nil {
		return // sipgo cannot read back its own serialization: nothing to compare
	}
	if mine.String() != theirs.String() {
		t.Fatalf("answers differ:\n%s\nsipgo:\n%s", mine.String(), theirs.String())
	}
}

// BenchmarkParsePlain is the parse of SIPp's second REGISTER, alone.
func BenchmarkParsePlain(b *testing.B) {
	data := []byte(sippRegister)
	var raw rawHeaders
	b.ReportAllocs()
	for b.Loop() {
		if parsePlain(data, &raw) == nil {
			b.Fatal("not plain")
		}
	}
}

// Every name knownHeader answers for is sipgo's: the typed ones have its
// parser, the text ones have none.
func TestKnownHeadersAreSipgos(t *testing.T) {
	for _, name := range []string{"Via", "v", "From", "f", "To", "t", "Call-ID", "i", "CSeq", "Contact", "m", "Max-Forwards", "Content-Length", "l",
		"Expires", "User-Agent", "Authorization", "Allow", "Supported", "Accept", "Allow-Events", "Accept-Language", "Accept-Encoding", "Date", "Path", "Require", "Proxy-Require", "X-Other"} {
		parse, key, known := knownHeader(name)
		theirs, theirsTyped := headerParsers[string(asciiLower(nil, name))]
		switch {
		case !known && name != "X-Other":
			t.Errorf("%s: not known", name)
		case !known:
		case (parse != nil) != theirsTyped:
			t.Errorf("%s: typed %t, sipgo %t", name, parse != nil, theirsTyped)
		case parse != nil && (string(key) != string(asciiLower(nil, name)) && len(name) > 1 || fmt.Sprintf("%p", parse) != fmt.Sprintf("%p", theirs)):
			t.Errorf("%s: parser or key %q differs from sipgo's", name, key)
		}
	}
}
