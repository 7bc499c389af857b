package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Parse decodes a document without validating it. Every problem the JSON
// itself has is reported, each with its path: syntax errors (with line and
// column), values of the wrong type, unknown fields (exact, case-sensitive
// names), and fields given twice. The error is Errors.
func Parse(data []byte) (*Document, error) {
	w := walker{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	w.document()
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	d := new(Document)
	if err := json.Unmarshal(data, d); err != nil {
		// Not expected once the walk passed; report it with the best path.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, Errors{{Path: te.Field, Message: fmt.Sprintf("expected %s, got %s", te.Type, te.Value)}}
		}
		return nil, Errors{{Message: err.Error()}}
	}
	return d, nil
}

// Load parses and validates a document. The error is Errors.
func Load(data []byte) (*Document, error) {
	d, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if errs := d.Validate(); len(errs) > 0 {
		return nil, errs
	}
	return d, nil
}

// walker checks the JSON token stream against the Document type, so that
// every unknown field and type error is reported with its full path (the
// standard decoder stops at the first one and reports no array indexes).
type walker struct {
	data []byte
	dec  *json.Decoder
	errs Errors
}

// errStop ends the walk after a syntax error: nothing after it can be trusted.
var errStop = errors.New("stop")

func (w *walker) document() {
	tok, err := w.dec.Token()
	if err == io.EOF {
		w.errs.add("", "empty document")
		return
	}
	if err != nil {
		w.syntax("", err)
		return
	}
	if tok != json.Delim('{') {
		w.errs.add("", "expected object, got %s", describe(tok))
		return
	}
	if w.object(reflect.TypeFor[Document](), "", tok) != nil {
		return
	}
	if _, err := w.dec.Token(); err != io.EOF {
		if err != nil {
			w.syntax("", err)
			return
		}
		w.syntax("", errors.New("unexpected data after the document"))
	}
}

func (w *walker) token(path string) (json.Token, error) {
	tok, err := w.dec.Token()
	if err != nil {
		w.syntax(path, err)
		return nil, errStop
	}
	return tok, nil
}

func (w *walker) syntax(path string, err error) {
	// The decoder's offsets are approximate; a whole-input scan finds the
	// exact offending byte.
	var raw json.RawMessage
	if serr := json.Unmarshal(w.data, &raw); serr != nil {
		err = serr
	}
	off := w.dec.InputOffset()
	msg := err.Error()
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se) && msg != "unexpected end of JSON input":
		off = se.Offset
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &se):
		off = int64(len(w.data)) + 1
		msg = "unexpected end of input"
	}
	w.errs.add(path, "invalid JSON at %s: %s", w.position(off), strings.TrimPrefix(msg, "json: "))
}

// position converts a byte offset into "line L, column C" (1-based, the
// column counting bytes).
func (w *walker) position(off int64) string {
	// The offending byte is the one before off; at the end of the input,
	// off is len+1 so that the position is just after the last byte.
	off = min(max(off-1, 0), int64(len(w.data)))
	line, col := 1, 1
	for _, c := range w.data[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d", line, col)
}

// value checks the next value against t.
// voicemailKindType also takes a boolean (VoicemailKind.UnmarshalJSON).
var voicemailKindType = reflect.TypeFor[VoicemailKind]()

func (w *walker) value(t reflect.Type, path string) error {
	tok, err := w.token(path)
	if err != nil {
		return err
	}
	return w.valueTok(t, path, tok)
}

// valueTok checks the value that starts with tok against t. JSON null is
// accepted everywhere and means the zero value (the default).
func (w *walker) valueTok(t reflect.Type, path string, tok json.Token) error {
	if tok == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return w.valueTok(t.Elem(), path, tok)
	case reflect.Struct:
		if tok != json.Delim('{') {
			return w.mismatch(path, "object", tok)
		}
		return w.object(t, path, tok)
	case reflect.Map:
		if tok != json.Delim('{') {
			return w.mismatch(path, "object", tok)
		}
		seen := make(map[string]bool)
		for w.dec.More() {
			kt, err := w.token(path)
			if err != nil {
				return err
			}
			k := kt.(string) // the decoder only yields strings as keys
			p := key(path, k)
			if seen[k] {
				w.errs.add(p, "duplicate key")
			}
			seen[k] = true
			if err := w.value(t.Elem(), p); err != nil {
				return err
			}
		}
		_, err := w.token(path)
		return err
	case reflect.Slice:
		if tok != json.Delim('[') {
			return w.mismatch(path, "array", tok)
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), index(path, i)); err != nil {
				return err
			}
		}
		_, err := w.token(path)
		return err
	case reflect.String:
		if _, ok := tok.(bool); ok && t == voicemailKindType {
			return nil // true or false, the form before the kinds
		}
		if _, ok := tok.(string); !ok {
			return w.mismatch(path, "string", tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return w.mismatch(path, "true or false", tok)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.mismatch(path, "integer", tok)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				w.errs.add(path, "integer %s out of range", n)
			} else {
				w.errs.add(path, "expected integer, got %s", n)
			}
		}
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.mismatch(path, "number", tok)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			w.errs.add(path, "number %s out of range", n)
		}
	default:
		panic("appliance/config: unsupported kind " + t.Kind().String())
	}
	return nil
}

// object checks the members of a JSON object (its '{' already read) against
// the struct type t.
func (w *walker) object(t reflect.Type, path string, _ json.Token) error {
	fields := fieldsOf(t)
	seen := make(map[string]bool)
	for w.dec.More() {
		kt, err := w.token(path)
		if err != nil {
			return err
		}
		name := kt.(string)
		p := field(path, name)
		if seen[name] {
			w.errs.add(p, "duplicate field")
		}
		seen[name] = true
		ft, ok := fields.byName[name]
		if !ok {
			if s := suggest(name, fields.names); s != "" {
				w.errs.add(p, "unknown field (did you mean %q?)", s)
			} else {
				w.errs.add(p, "unknown field")
			}
			if err := w.skip(p); err != nil {
				return err
			}
			continue
		}
		if err := w.value(ft, p); err != nil {
			return err
		}
	}
	_, err := w.token(path)
	return err
}

// mismatch reports a value of the wrong type and skips it.
func (w *walker) mismatch(path, want string, tok json.Token) error {
	w.errs.add(path, "expected %s, got %s", want, describe(tok))
	return w.skipRest(path, tok)
}

func (w *walker) skip(path string) error {
	tok, err := w.token(path)
	if err != nil {
		return err
	}
	return w.skipRest(path, tok)
}

// skipRest skips the rest of the value that began with tok.
func (w *walker) skipRest(path string, tok json.Token) error {
	if d, ok := tok.(json.Delim); !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := w.token(path)
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "object"
		}
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number " + string(v)
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

type structFields struct {
	byName map[string]reflect.Type
	names  []string
}

var fieldCache sync.Map // reflect.Type → *structFields

// fieldsOf lists the JSON names of t's fields.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: make(map[string]reflect.Type)}
	for sf := range t.Fields() {
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.byName[name] = sf.Type
		f.names = append(f.names, name)
	}
	fieldCache.Store(t, f)
	return f
}

// suggest returns the known name closest to an unknown one (same letters in
// another case, or at most two edits away), or "".
func suggest(name string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return n
		}
		if d := editDistance(strings.ToLower(name), n, bestDist); d < bestDist {
			best, bestDist = n, d
		}
	}
	if len(name) <= bestDist { // "a" is one edit from too much
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or max when it is at
// least max (long inputs stop early).
func editDistance(a, b string, max int) int {
	if d := len(a) - len(b); d >= max || -d >= max {
		return max
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= max {
			return max
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], max)
}
