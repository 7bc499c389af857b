package config

import (
	"fmt"
	"strconv"
	"strings"
)

// FieldError is one problem in a document, located by its JSON path
// (see the package documentation for the path syntax). An empty Path means
// the document as a whole.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// Errors is the complete list of problems found in a document, in a stable
// order. It is what HTTP 422 answers carry. Use errors.As to get it back from
// Parse, Load or Seal.
type Errors []FieldError

func (e Errors) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if len(e) == 1 {
		b.WriteString("1 error: ")
	} else {
		fmt.Fprintf(&b, "%d errors: ", len(e))
	}
	for i, fe := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(fe.Error())
	}
	return b.String()
}

// Err returns e as an error, or nil when e is empty (avoiding a non-nil
// error interface holding an empty list).
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

// Paths lists the paths of e, in order.
func (e Errors) Paths() []string {
	out := make([]string, len(e))
	for i, fe := range e {
		out[i] = fe.Path
	}
	return out
}

func (e *Errors) add(path, format string, args ...any) {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	*e = append(*e, FieldError{Path: path, Message: msg})
}

// Path construction: field names joined by ".", array indexes in brackets,
// map keys as quoted strings in brackets.

func field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func key(path, k string) string { return path + "[" + strconv.Quote(k) + "]" }
