package fastpath

import (
	"bytes"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// headerParsers are sipgo's own parsers of typed headers (Via, From, To,
// Contact, Call-ID, CSeq, …), keyed by lower-case name and compact form.
var headerParsers = sip.DefaultHeadersParser()

// parseRequest parses a REGISTER or OPTIONS datagram into the same
// sip.Request sip.ParseMessage makes of it, with fewer copies: the
// datagram becomes one string, and the start line, every header name and
// value are pieces of it handed to sipgo's own URI and header parsers
// (sipgo converts each line, name and value to a string of its own: a
// third of the allocations of a registration). It takes only the plain
// form: CRLF line ends, no folded or comma-separated typed headers, no
// body, a start line "METHOD SP URI SP SIP/2.0"; anything else, and any
// error, is handed to sip.ParseMessage itself, so what comes out is
// sipgo's answer either way (FuzzParseRequest compares the two).
// raw, when not nil, is given the lines of the headers an answer copies
// (see rawHeaders); it is left empty when sipgo parsed.
func parseRequest(data []byte, raw *rawHeaders) (sip.Message, error) {
	if req := parsePlain(data, raw); req != nil {
		return req, nil
	}
	if raw != nil {
		raw.n = 0
	}
	return sip.ParseMessage(data)
}

// rawHeaders are the Via, From, To, Call-ID and CSeq header objects of a
// request parsed by parsePlain with their lines as received (without
// CRLF): an answer that carries these very objects is written with the
// lines (writeAnswer) instead of serializing them again.
type rawHeaders struct {
	n    int
	hdr  [8]sip.Header
	line [8]string
}

func (r *rawHeaders) add(h sip.Header, line string) {
	if r == nil || r.n == len(r.hdr) {
		return
	}
	switch h.(type) {
	case *sip.ViaHeader, *sip.FromHeader, *sip.ToHeader, *sip.CallIDHeader, *sip.CSeqHeader:
		r.hdr[r.n], r.line[r.n] = h, line
		r.n++
	}
}

// lineOf returns the line of the header object h, if it is one of them.
func (r *rawHeaders) lineOf(h sip.Header) (string, bool) {
	for i := 0; i < r.n; i++ {
		if r.hdr[i] == h {
			return r.line[i], true
		}
	}
	return "", false
}

// parsePlain is parseRequest's own parse; nil means "not the plain form".
func parsePlain(data []byte, raw *rawHeaders) *sip.Request {
	if raw != nil {
		raw.n = 0
	}
	if len(data) > sip.ParseMaxMessageLength || !bytes.HasSuffix(data, []byte("\r\n\r\n")) {
		return nil // no end of headers, or a body (or trailing bytes)
	}
	// Every line with its CRLF. An earlier blank line (a body) shows
	// below as an empty header line, and a CR or LF alone (sipgo reads a
	// line up to a CR) as a line that does not end in CRLF or holds a CR:
	// each line is scanned twice, the whole datagram no more.
	s := string(data[:len(data)-2])
	line, pos := nextLine(s, 0)
	if pos < 0 {
		return nil
	}
	// The start line.
	sp1 := strings.IndexByte(line, ' ')
	if sp1 < 0 {
		return nil
	}
	var method sip.RequestMethod
	switch line[:sp1] {
	case "REGISTER":
		method = sip.REGISTER
	case "OPTIONS":
		method = sip.OPTIONS
	default:
		return nil
	}
	rest := line[sp1+1:]
	sp2 := strings.IndexByte(rest, ' ')
	if sp2 < 0 || rest[sp2+1:] != "SIP/2.0" {
		return nil
	}
	var ruri sip.Uri
	if err := sip.ParseUri(rest[:sp2], &ruri); err != nil || ruri.Wildcard {
		return nil
	}
	req := sip.NewRequest(method, ruri)
	// The headers: each line up to the blank one.
	var lower [64]byte
	for pos < len(s) {
		line, pos = nextLine(s, pos)
		if pos < 0 || len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
			return nil // a stray CR or LF, a body, or folded: sipgo's job
		}
		colon := strings.IndexByte(line, ':')
		if colon < 0 {
			return nil
		}
		name := strings.TrimSpace(line[:colon])
		value := strings.TrimSpace(line[colon+1:])
		parse, key, known := knownHeader(name)
		if !known {
			if len(name) > len(lower) {
				return nil
			}
			key = asciiLower(lower[:0], name)
			parse = headerParsers[string(key)]
		}
		if parse == nil { // a header sipgo keeps as text
			req.AppendHeader(sip.NewHeader(name, value))
			continue
		}
		h, err := parse(key, value)
		if err != nil {
			return nil // malformed, or several values after a comma
		}
		if cl, ok := h.(*sip.ContentLengthHeader); ok && *cl != 0 {
			return nil // a body is announced that is not there
		}
		req.AppendHeader(h)
		raw.add(h, line)
	}
	return req
}

// nextLine returns the line of s that starts at pos without its CRLF, and
// where the next one starts; -1 when it does not end in CRLF or holds a
// CR.
func nextLine(s string, pos int) (string, int) {
	n := strings.IndexByte(s[pos:], '\n')
	if n < 1 || s[pos+n-1] != '\r' {
		return "", -1
	}
	line := s[pos : pos+n-1]
	if strings.IndexByte(line, '\r') >= 0 {
		return "", -1
	}
	return line, pos + n + 1
}

// Lower-case keys of the typed headers (sipgo's parsers are given theirs).
var (
	keyVia           = []byte("via")
	keyFrom          = []byte("from")
	keyTo            = []byte("to")
	keyCallID        = []byte("call-id")
	keyCSeq          = []byte("cseq")
	keyContact       = []byte("contact")
	keyMaxForwards   = []byte("max-forwards")
	keyContentLength = []byte("content-length")
)

// knownHeader finds the parser of a header by its name as phones write
// it, without lower-casing it and looking it up (known false: look it up);
// a known header without a parser is one sipgo keeps as text.
func knownHeader(name string) (parse sip.HeaderParser, key []byte, known bool) {
	switch name {
	case "Via", "v":
		return parseVia, keyVia, true
	case "From", "f":
		return parseFrom, keyFrom, true
	case "To", "t":
		return parseTo, keyTo, true
	case "Call-ID", "i":
		return parseCallID, keyCallID, true
	case "CSeq":
		return parseCSeq, keyCSeq, true
	case "Contact", "m":
		return parseContact, keyContact, true
	case "Max-Forwards":
		return parseMaxForwards, keyMaxForwards, true
	case "Content-Length", "l":
		return parseContentLength, keyContentLength, true
	case "Expires", "User-Agent", "Authorization", "Allow", "Supported", "Accept",
		"Allow-Events", "Accept-Language", "Accept-Encoding", "Date", "Path", "Require", "Proxy-Require":
		return nil, nil, true
	}
	return nil, nil, false
}

var (
	parseVia           = headerParsers[string(keyVia)]
	parseFrom          = headerParsers[string(keyFrom)]
	parseTo            = headerParsers[string(keyTo)]
	parseCallID        = headerParsers[string(keyCallID)]
	parseCSeq          = headerParsers[string(keyCSeq)]
	parseContact       = headerParsers[string(keyContact)]
	parseMaxForwards   = headerParsers[string(keyMaxForwards)]
	parseContentLength = headerParsers[string(keyContentLength)]
)

// asciiLower appends s lower-cased (ASCII letters only, as sipgo does) to dst.
func asciiLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
