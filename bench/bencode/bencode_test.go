package bencode

import (
	"bytes"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	in := map[string]any{"command": "offer", "call-id": "a:b", "seq": 7,
		"flags": []any{"trust-address", "symmetric"}, "nested": map[string]any{"x": []any{1, "y"}}}
	var b bytes.Buffer
	Encode(&b, in)
	if want := "d7:call-id3:a:b7:command5:offer5:flagsl13:trust-address9:symmetrice6:nestedd1:xli1e1:yee3:seqi7ee"; b.String() != want {
		t.Fatalf("encoded %q, want %q", b.String(), want)
	}
	out, next, err := Decode(b.Bytes(), 0)
	if err != nil || next != b.Len() || !reflect.DeepEqual(out, in) {
		t.Fatalf("decoded %#v, %d, %v", out, next, err)
	}
	for _, bad := range []string{"", "i12", "5:ab", "di1e1:xe", "x", "-1:"} {
		if _, _, err := Decode([]byte(bad), 0); err == nil {
			t.Errorf("Decode(%q): no error", bad)
		}
	}
}
