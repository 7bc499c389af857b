// Package bencode is the minimal bencode (BEP 3) of rtpengine's ng control
// protocol, shared by the bench tools that speak it (bench/rtpblast, the
// client; bench/relayd, the server): strings, integers, lists and
// dictionaries, nothing else. It is not used by outpostd.
package bencode

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Encode appends v (string, int, []any or map[string]any, nested) to b;
// dictionary keys are written sorted, as BEP 3 requires.
func Encode(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case string:
		fmt.Fprintf(b, "%d:%s", len(x), x)
	case int:
		fmt.Fprintf(b, "i%de", x)
	case []any:
		b.WriteByte('l')
		for _, e := range x {
			Encode(b, e)
		}
		b.WriteByte('e')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('d')
		for _, k := range keys {
			Encode(b, k)
			Encode(b, x[k])
		}
		b.WriteByte('e')
	default:
		panic(fmt.Sprintf("bencode: cannot encode %T", v))
	}
}

// Decode reads one value at p[i:] and returns it with the index after it.
func Decode(p []byte, i int) (any, int, error) {
	if i >= len(p) {
		return nil, i, errors.New("short")
	}
	switch c := p[i]; {
	case c == 'i':
		j := bytes.IndexByte(p[i:], 'e')
		if j < 0 {
			return nil, i, errors.New("bad int")
		}
		n, err := strconv.Atoi(string(p[i+1 : i+j]))
		return n, i + j + 1, err
	case c == 'l':
		var out []any
		for i++; i < len(p) && p[i] != 'e'; {
			v, ni, err := Decode(p, i)
			if err != nil {
				return nil, i, err
			}
			out, i = append(out, v), ni
		}
		return out, i + 1, nil
	case c == 'd':
		out := map[string]any{}
		for i++; i < len(p) && p[i] != 'e'; {
			k, ni, err := Decode(p, i)
			if err != nil {
				return nil, i, err
			}
			ks, ok := k.(string)
			if !ok {
				return nil, i, errors.New("non-string key")
			}
			v, ni2, err := Decode(p, ni)
			if err != nil {
				return nil, i, err
			}
			out[ks], i = v, ni2
		}
		return out, i + 1, nil
	case c >= '0' && c <= '9':
		j := bytes.IndexByte(p[i:], ':')
		if j < 0 {
			return nil, i, errors.New("bad string")
		}
		n, err := strconv.Atoi(string(p[i : i+j]))
		s := i + j + 1
		if err != nil || n < 0 || s+n > len(p) {
			return nil, i, errors.New("bad string length")
		}
		return string(p[s : s+n]), s + n, nil
	}
	return nil, i, fmt.Errorf("bad byte %q", p[i])
}
