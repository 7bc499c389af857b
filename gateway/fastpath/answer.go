package fastpath

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// newToTag is a To tag for an answer (RFC 3261 §8.2.6.2; 64 random bits,
// §19.3 asks for 32). The path puts it on the request's To before asking
// for the answer, so the answer can carry the request's own To (see
// writeAnswer) and sipgo need not make a UUID for a copy.
func newToTag() string { return strconv.FormatUint(rand.Uint64(), 36) }

// tagTo puts a new tag on req's To when it has none (the answer's To is
// the request's own header object) and returns that header and the tag,
// which writeAnswer needs to write the To line as received plus the tag;
// nil and "" when the To already had one.
func tagTo(req *sip.Request) (sip.Header, string) {
	to := req.To()
	if to == nil || to.Params.Has("tag") {
		return nil, ""
	}
	tag := newToTag()
	to.Params.Add("tag", tag)
	return to, tag
}

// writeAnswer writes res to buf as res.StringWrite would, except that a
// header that is one of the request's own objects (a registrar's answer
// carries the request's Via, From, To, Call-ID and CSeq) is written as the
// line it arrived as: no second serialization of its URI and parameters.
// The To the path tagged (tagged, tag) gets its tag after the line.
func writeAnswer(buf *bytes.Buffer, res *sip.Response, raw *rawHeaders, tagged sip.Header, tag string) {
	if raw == nil || raw.n == 0 || res.Body() != nil || res.CompactHeaders || len(res.Headers()) == 0 {
		res.StringWrite(buf)
		return
	}
	buf.WriteString(res.SipVersion)
	buf.WriteByte(' ')
	buf.Write(strconv.AppendInt(buf.AvailableBuffer(), int64(res.StatusCode), 10))
	buf.WriteByte(' ')
	buf.WriteString(res.Reason)
	buf.WriteString("\r\n")
	for _, h := range res.Headers() {
		if line, ok := raw.lineOf(h); ok {
			if h == tagged {
				// Right after the value: sipgo reads "> ;tag=x" (white
				// space the line ended in) as an empty parameter first.
				buf.WriteString(strings.TrimRight(line, " \t"))
				buf.WriteString(";tag=")
				buf.WriteString(tag)
			} else {
				buf.WriteString(line)
			}
		} else {
			h.StringWrite(buf)
		}
		buf.WriteString("\r\n")
	}
	buf.WriteString("\r\n")
}
