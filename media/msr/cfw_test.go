package msr

import (
	"bufio"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func read(s string) (*Frame, error) { return ReadFrame(bufio.NewReader(strings.NewReader(s))) }

func TestReadFrame(t *testing.T) {
	good := []struct {
		name string
		in   string
		want Frame
	}{
		{"SYNC", "CFW 8djae7khauj SYNC\r\nDialog-ID: fd4fush5117\r\nKeep-Alive: 100\r\nPackages: msc-ivr/1.0, msc-mixer/1.0\r\n\r\n",
			Frame{TransID: "8djae7khauj", Method: "SYNC", Header: []Field{{"Dialog-ID", "fd4fush5117"}, {"Keep-Alive", "100"}, {"Packages", "msc-ivr/1.0, msc-mixer/1.0"}}}},
		{"K-ALIVE, bare LF", "CFW a1b2 K-ALIVE\n\n", Frame{TransID: "a1b2", Method: "K-ALIVE"}},
		{"response", "CFW 8djae7khauj 200\r\nKeep-Alive: 100\r\n\r\n",
			Frame{TransID: "8djae7khauj", Status: 200, Header: []Field{{"Keep-Alive", "100"}}}},
		{"response with comment", "CFW abcd 420 Unsupported Control Package\r\n\r\n", Frame{TransID: "abcd", Status: 420, Comment: "Unsupported Control Package"}},
		{"CONTROL with body", "CFW 7a6b.c+d%e=f CONTROL\r\nControl-Package: msc-ivr/1.0\r\nContent-Type: application/msc-ivr+xml\r\ncontent-length : 11\r\n\r\n<mscivr/>\r\n",
			Frame{TransID: "7a6b.c+d%e=f", Method: "CONTROL", Header: []Field{{"Control-Package", "msc-ivr/1.0"}, {"Content-Type", "application/msc-ivr+xml"}}, Body: []byte("<mscivr/>\r\n")}},
		{"empty header value", "CFW abcd SYNC\r\nSupported:\r\n\r\n", Frame{TransID: "abcd", Method: "SYNC", Header: []Field{{"Supported", ""}}}},
	}
	for _, c := range good {
		f, err := read(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(*f, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, *f, c.want)
		}
		// Marshal then read gives the same frame back.
		back, err := read(string(f.Marshal()))
		if err != nil || !reflect.DeepEqual(back, f) {
			t.Errorf("%s: round trip %+v, %v", c.name, back, err)
		}
	}

	bad := map[string]string{
		"not CFW":                "SIP/2.0 200 OK\r\n\r\n",
		"lower-case protocol":    "cfw abcd SYNC\r\n\r\n",
		"short trans-id":         "CFW abc SYNC\r\n\r\n",
		"long trans-id":          "CFW " + strings.Repeat("a", 33) + " SYNC\r\n\r\n",
		"trans-id punctuation":   "CFW .abc SYNC\r\n\r\n",
		"trans-id bad char":      "CFW ab/cd SYNC\r\n\r\n",
		"no method":              "CFW abcd\r\n\r\n",
		"lower-case method":      "CFW abcd sync\r\n\r\n",
		"method with trailer":    "CFW abcd SYNC now\r\n\r\n",
		"status out of range":    "CFW abcd 199\r\n\r\n",
		"status four digits":     "CFW abcd 2000\r\n\r\n",
		"empty comment":          "CFW abcd 200 \r\n\r\n",
		"header without colon":   "CFW abcd SYNC\r\nDialog-ID fd4\r\n\r\n",
		"header bad name":        "CFW abcd SYNC\r\nDialog ID: x\r\n\r\n",
		"folded header":          "CFW abcd SYNC\r\nDialog-ID: x\r\n continued\r\n\r\n",
		"control char":           "CFW abcd SYNC\r\nDialog-ID: a\x00b\r\n\r\n",
		"negative length":        "CFW abcd CONTROL\r\nContent-Length: -1\r\n\r\n",
		"huge length":            "CFW abcd CONTROL\r\nContent-Length: 99999999999\r\n\r\n",
		"conflicting lengths":    "CFW abcd CONTROL\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"truncated body":         "CFW abcd CONTROL\r\nContent-Length: 10\r\n\r\nabc",
		"truncated headers":      "CFW abcd SYNC\r\nDialog-ID: x\r\n",
		"truncated start":        "CFW abcd SY",
		"line too long":          "CFW abcd SYNC\r\nX: " + strings.Repeat("a", maxLine) + "\r\n\r\n",
		"too many headers":       "CFW abcd SYNC\r\n" + strings.Repeat("X: y\r\n", maxHeaders+1) + "\r\n",
		"binary garbage":         "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n",
		"HTTP on the wrong port": "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	}
	for name, in := range bad {
		if f, err := read(in); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: got %+v, %v; want ErrFrame", name, f, err)
		}
	}
	if _, err := read(""); err != io.EOF {
		t.Errorf("empty stream: %v, want io.EOF", err)
	}
	// Two frames back to back.
	r := bufio.NewReader(strings.NewReader("CFW abcd K-ALIVE\r\n\r\nCFW abce K-ALIVE\r\n\r\n"))
	for _, id := range []string{"abcd", "abce"} {
		if f, err := ReadFrame(r); err != nil || f.TransID != id {
			t.Errorf("pipelined %s: %+v %v", id, f, err)
		}
	}
	if _, err := ReadFrame(r); err != io.EOF {
		t.Errorf("after two frames: %v", err)
	}
}

// FuzzReadFrame: the parser never panics, fails only with ErrFrame (or
// the stream's end), returns only clean values, and what it parses
// survives Marshal unchanged. Seeds: testdata/fuzz/FuzzReadFrame.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte("CFW 8djae7khauj SYNC\r\nDialog-ID: fd4fush5117\r\nKeep-Alive: 100\r\nPackages: msc-ivr/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReader(strings.NewReader(string(in)))
		for range 4 {
			fr, err := ReadFrame(r)
			if err != nil {
				if !errors.Is(err, ErrFrame) && err != io.EOF {
					t.Fatalf("error %v is neither ErrFrame nor io.EOF", err)
				}
				if fr != nil {
					t.Fatalf("frame %+v with error %v", fr, err)
				}
				return
			}
			if (fr.Method == "") == (fr.Status == 0) {
				t.Fatalf("neither or both of method and status: %+v", fr)
			}
			if len(fr.Body) > maxBody || len(fr.Header) > maxHeaders {
				t.Fatalf("limits exceeded: %d headers, %d bytes", len(fr.Header), len(fr.Body))
			}
			for _, h := range fr.Header {
				if strings.EqualFold(h.Name, "Content-Length") || !printable(h.Value) || strings.ContainsAny(h.Name, " :\r\n") {
					t.Fatalf("header %q: %q", h.Name, h.Value)
				}
			}
			back, err := ReadFrame(bufio.NewReader(strings.NewReader(string(fr.Marshal()))))
			if err != nil {
				t.Fatalf("re-marshalled %q does not parse: %v", fr.Marshal(), err)
			}
			if !reflect.DeepEqual(back, fr) {
				t.Fatalf("round trip changed the frame:\n%+v\n%+v", fr, back)
			}
		}
	})
}
