package msr

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/outpost/outpost/siptarget"
)

// RFC 6230 framing (§9, formal syntax):
//
//	control-request  = "CFW" SP trans-id SP method CRLF *header CRLF [body]
//	control-response = "CFW" SP trans-id SP status-code [SP comment] CRLF *header CRLF [body]
//	trans-id         = alphanum 3*31(alphanum / "." / "-" / "+" / "%" / "=")
//	header           = name ":" value CRLF; the body length is Content-Length
//
// Methods are SYNC, K-ALIVE, CONTROL and REPORT; status codes are 200–699.

// Limits of ReadFrame: a peer that exceeds them gets its channel closed.
const (
	maxLine     = 4096
	maxHeaders  = 64
	maxBody     = 64 << 10
	maxTransID  = 32
	minTransID  = 4
	cfwProtocol = "CFW"
)

// ErrFrame marks a malformed control-channel frame.
var ErrFrame = errors.New("media/msr: malformed CFW frame")

// Field is one header of a frame.
type Field struct{ Name, Value string }

// Frame is one control-channel request or response.
type Frame struct {
	TransID string
	Method  string // request: SYNC, K-ALIVE, CONTROL, REPORT, ...; "" for a response
	Status  int    // response: 200–699; 0 for a request
	Comment string // response only, optional
	// Header holds every header but Content-Length, in order.
	Header []Field
	Body   []byte
}

// Get returns the first header called name (case-insensitive).
func (f *Frame) Get(name string) (string, bool) {
	for _, h := range f.Header {
		if strings.EqualFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

// Marshal writes f on the wire; Content-Length is written when there is a
// body.
func (f *Frame) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(cfwProtocol)
	b.WriteByte(' ')
	b.WriteString(f.TransID)
	b.WriteByte(' ')
	if f.Method != "" {
		b.WriteString(f.Method)
	} else {
		b.WriteString(strconv.Itoa(f.Status))
		if f.Comment != "" {
			b.WriteByte(' ')
			b.WriteString(f.Comment)
		}
	}
	b.WriteString("\r\n")
	for _, h := range f.Header {
		b.WriteString(h.Name)
		b.WriteString(": ")
		b.WriteString(h.Value)
		b.WriteString("\r\n")
	}
	if len(f.Body) > 0 {
		b.WriteString("Content-Length: ")
		b.WriteString(strconv.Itoa(len(f.Body)))
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	b.Write(f.Body)
	return b.Bytes()
}

// ReadFrame reads one frame. It returns io.EOF when the stream ends
// cleanly between frames and an error wrapping ErrFrame (or the read
// error) otherwise; after an error the stream is not usable. Lines may end
// in CRLF or a bare LF.
func ReadFrame(r *bufio.Reader) (*Frame, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	f, err := parseStart(line)
	if err != nil {
		return nil, err
	}
	length := -1
	for n := 0; ; n++ {
		line, err := readLine(r)
		if err != nil {
			return nil, unexpectedEOF(err)
		}
		if line == "" {
			break
		}
		if n == maxHeaders {
			return nil, fmt.Errorf("%w: more than %d headers", ErrFrame, maxHeaders)
		}
		name, value, err := parseHeader(line)
		if err != nil {
			return nil, err
		}
		if strings.EqualFold(name, "Content-Length") {
			v, err := strconv.Atoi(value)
			if err != nil || v < 0 || v > maxBody || len(value) > 6 {
				return nil, fmt.Errorf("%w: Content-Length %q", ErrFrame, value)
			}
			if length >= 0 && length != v {
				return nil, fmt.Errorf("%w: conflicting Content-Length", ErrFrame)
			}
			length = v
			continue
		}
		f.Header = append(f.Header, Field{Name: name, Value: value})
	}
	if length > 0 {
		f.Body = make([]byte, length)
		if _, err := io.ReadFull(r, f.Body); err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	return f, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated: %w", ErrFrame, io.ErrUnexpectedEOF)
	}
	return err
}

// readLine reads up to LF, without the line end; lines longer than
// maxLine are refused.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(b)+len(chunk) > maxLine+2 {
			return "", fmt.Errorf("%w: line longer than %d bytes", ErrFrame, maxLine)
		}
		b = append(b, chunk...)
		switch {
		case err == nil:
			b = b[:len(b)-1]
			if n := len(b); n > 0 && b[n-1] == '\r' {
				b = b[:n-1]
			}
			return string(b), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(b) > 0:
			return "", fmt.Errorf("%w: truncated: %w", ErrFrame, io.ErrUnexpectedEOF)
		default:
			return "", err
		}
	}
}

func parseStart(line string) (*Frame, error) {
	proto, rest, ok := strings.Cut(line, " ")
	if !ok || proto != cfwProtocol {
		return nil, fmt.Errorf("%w: start line %.40q", ErrFrame, line)
	}
	id, rest, ok := strings.Cut(rest, " ")
	if !ok || !validTransID(id) {
		return nil, fmt.Errorf("%w: transaction id %.40q", ErrFrame, id)
	}
	f := &Frame{TransID: id}
	word, comment, hasComment := strings.Cut(rest, " ")
	if siptarget.IsDigits(word) {
		code, _ := strconv.Atoi(word)
		if len(word) != 3 || code < 200 || code > 699 {
			return nil, fmt.Errorf("%w: status code %q", ErrFrame, word)
		}
		if hasComment && (comment == "" || !printable(comment)) {
			return nil, fmt.Errorf("%w: status comment", ErrFrame)
		}
		f.Status, f.Comment = code, comment
		return f, nil
	}
	if hasComment || !validMethod(word) {
		return nil, fmt.Errorf("%w: method %.40q", ErrFrame, rest)
	}
	f.Method = word
	return f, nil
}

func parseHeader(line string) (string, string, error) {
	name, value, ok := strings.Cut(line, ":")
	name = strings.TrimRight(name, " \t")
	if !ok || !validToken(name) {
		return "", "", fmt.Errorf("%w: header line %.40q", ErrFrame, line)
	}
	value = strings.Trim(value, " \t")
	if !printable(value) {
		return "", "", fmt.Errorf("%w: header %s: control characters", ErrFrame, name)
	}
	return name, value, nil
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func validTransID(s string) bool {
	if len(s) < minTransID || len(s) > maxTransID || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && !strings.ContainsRune(".-+%=", rune(c)) {
			return false
		}
	}
	return true
}

func validMethod(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z') && c != '-' && c != '_' && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return s[0] >= 'A' && s[0] <= 'Z'
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && !strings.ContainsRune("-.!%*_+`'~", rune(c)) {
			return false
		}
	}
	return true
}

// printable refuses control characters other than HTAB (UTF-8 is allowed).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
