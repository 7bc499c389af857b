package sanity

import (
	"net/http"
	"slices"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// Check is the request validation RFC 3261 §8.2 puts before any
// processing (and before authentication: none of these answers tells an
// unauthenticated peer anything about users), for what sipgo's parser
// lets through. It returns the answer to a request that must not go on,
// or nil. Found with the RFC 4475 torture messages
// (cmd/outpostd/torture_e2e_test.go), each named below by its file.
// It may drop an Authorization of an unknown scheme (see below).
func Check(req *sip.Request) *sip.Response {
	// §8.2.2.1: a Request-URI scheme the box does not serve (unkscm).
	switch strings.ToLower(req.Recipient.Scheme) {
	case "sip", "sips", "tel":
	default:
		return sip.NewResponseFromRequest(req, 416, "Unsupported URI Scheme", nil)
	}
	// §19.1.1 Table 1: a Request-URI carries no headers (escruri).
	if req.Recipient.Headers != nil && req.Recipient.Headers.Length() > 0 {
		return bad(req, "Headers in Request-URI")
	}
	// One pass over the headers gathers what the checks below read:
	// sipgo's GetHeaders lowercases every header name on every call, and
	// this runs for every request, REGISTERs on the fast path included.
	var sc headerScan
	sc.scan(req)
	// §8.1.1: exactly one To, From, Call-ID, CSeq, Max-Forwards and
	// Content-Length; sipgo keeps the first of each (multi01, mcl01).
	for i, n := range sc.single {
		if n > 1 {
			return bad(req, "Multiple "+singleHeaders[i])
		}
	}
	// §8.1.1.5: the CSeq method matches the request's (mismatch02); sipgo
	// upper-cases the request method but not the CSeq one (intmeth).
	if cs := req.CSeq(); cs != nil && !strings.EqualFold(string(cs.MethodName), string(req.Method)) {
		return bad(req, "CSeq method does not match the request")
	}
	// §20.17: Date is an RFC 1123 date in GMT (baddate).
	if h := sc.date; h != nil {
		if _, err := http.ParseTime(h.Value()); err != nil || !strings.HasSuffix(strings.TrimSpace(h.Value()), "GMT") {
			return bad(req, "Bad Date")
		}
	}
	// §8.2.2.3: an extension the box does not support refused (bext01):
	// INVITE and UPDATE may require timer (RFC 4028), INVITE 100rel (RFC
	// 3262); nothing else. Not for ACK and CANCEL, which are never refused.
	if sc.require && req.Method != sip.ACK && req.Method != sip.CANCEL {
		var tags []string
		for _, h := range req.GetHeaders("Require") {
			for t := range strings.SplitSeq(h.Value(), ",") {
				if t = strings.TrimSpace(t); t != "" && !supportedExtension(req.Method, t) {
					tags = append(tags, t)
				}
			}
		}
		if len(tags) > 0 {
			res := sip.NewResponseFromRequest(req, sip.StatusBadExtension, "Bad Extension", nil)
			res.AppendHeader(sip.NewHeader("Unsupported", strings.Join(tags, ", ")))
			return res
		}
	}
	if req.Method == sip.INVITE {
		// §8.2.3: the box reads SDP, alone or in a multipart body (invut).
		if ct := req.ContentType(); ct != nil && len(req.Body()) > 0 {
			mt := strings.ToLower(strings.TrimSpace(strings.SplitN(ct.Value(), ";", 2)[0]))
			if mt != "application/sdp" && !strings.HasPrefix(mt, "multipart/") {
				res := sip.NewResponseFromRequest(req, sip.StatusUnsupportedMediaType, "Unsupported Media Type", nil)
				res.AppendHeader(sip.NewHeader("Accept", "application/sdp"))
				return res
			}
		}
		// §21.4.7: the answer will carry SDP, which the caller must
		// accept (sdp01).
		if h := req.GetHeader("Accept"); h != nil && !acceptsSDP(h.Value()) {
			res := sip.NewResponseFromRequest(req, sip.StatusNotAcceptable, "Not Acceptable", nil)
			res.AppendHeader(sip.NewHeader("Accept", "application/sdp"))
			return res
		}
	}
	// §22.4 / RFC 4475 §3.3.7 (regaut01): credentials of a scheme the box
	// does not know are ignored, so the request is challenged (401/407)
	// instead of refused as malformed.
	for i, name := range [...]string{"Authorization", "Proxy-Authorization"} {
		if sc.creds[i] > 0 && !sc.digest[i] {
			req.RemoveHeader(name)
		}
	}
	return nil
}

// singleHeaders are the headers a request carries exactly once (§8.1.1).
var singleHeaders = [...]string{"To", "From", "Call-ID", "CSeq", "Max-Forwards", "Content-Length"}

// headerScan is what Check reads from the headers, by name compared
// case-insensitively as sipgo's GetHeaders does.
type headerScan struct {
	single  [len(singleHeaders)]int // how many of each
	date    sip.Header              // the first Date
	require bool                    // a Require is present
	creds   [2]int                  // Authorization, Proxy-Authorization: how many
	digest  [2]bool                 // … and whether one is Digest
}

func (sc *headerScan) scan(req *sip.Request) {
	for _, h := range req.Headers() {
		name := h.Name()
		// First the names as sipgo's typed headers give them and as
		// phones write them: no case folding.
		if i := slices.Index(singleHeaders[:], name); i >= 0 {
			sc.single[i]++
			continue
		}
		switch name {
		case "Via", "Contact", "Expires", "User-Agent", "Allow", "Supported":
			continue
		}
		switch len(name) { // cheap pre-filter: most names match no check
		case 2, 4, 7, 12, 13, 14, 19:
		default:
			continue
		}
		for i, s := range singleHeaders {
			if strings.EqualFold(name, s) {
				sc.single[i]++
			}
		}
		switch {
		case strings.EqualFold(name, "Date"):
			if sc.date == nil {
				sc.date = h
			}
		case strings.EqualFold(name, "Require"):
			sc.require = true
		case strings.EqualFold(name, "Authorization"):
			sc.credential(0, h)
		case strings.EqualFold(name, "Proxy-Authorization"):
			sc.credential(1, h)
		}
	}
}

func (sc *headerScan) credential(i int, h sip.Header) {
	sc.creds[i]++
	scheme, _, _ := strings.Cut(strings.TrimSpace(h.Value()), " ")
	sc.digest[i] = sc.digest[i] || strings.EqualFold(scheme, "Digest")
}

// supportedExtension reports whether a request of method may require
// option tag.
func supportedExtension(method sip.RequestMethod, tag string) bool {
	switch {
	case strings.EqualFold(tag, "timer"):
		return method == sip.INVITE || method == sip.UPDATE
	case strings.EqualFold(tag, "100rel"):
		return method == sip.INVITE
	}
	return false
}

func bad(req *sip.Request, why string) *sip.Response {
	return sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request ("+why+")", nil)
}

// acceptsSDP reports whether an Accept value admits application/sdp. An
// empty Accept means no body is accepted; RFC 3261 §20.1 reads a missing
// one as application/sdp, which is not this function's case.
func acceptsSDP(v string) bool {
	for r := range strings.SplitSeq(v, ",") {
		mt := strings.ToLower(strings.TrimSpace(strings.SplitN(r, ";", 2)[0]))
		if mt == "application/sdp" || mt == "application/*" || mt == "*/*" {
			return true
		}
	}
	return false
}
