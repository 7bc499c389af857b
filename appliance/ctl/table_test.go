package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outpost/outpost/appliance/api"
)

// busyBox answers with the long values a real branch has: SIP URIs with
// parameters, UUID Call-IDs, user agents, file paths.
type busyBox struct{ *fakeBox }

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func (busyBox) Status(context.Context) api.Status {
	return api.Status{Site: "branch-042", Mode: "normal", Version: "v1.4.2-17-gdeadbeef", ConfigVersion: 12, ConfigSource: "fleet:/srv/hq/documents/branch-042.json",
		Listeners: []string{"udp:192.168.1.1:5060"}, Registrar: api.RegistrarStats{Registered: 123456789, Unregistered: 2345678, Expired: 3456789, Challenges: 987654321,
			AuthFailures: 1234567, AuthBlocked: 12345, StormRefused: 123456}, SIPDropped: 1234567}
}

func (busyBox) Registrations(context.Context) []api.Registration {
	return []api.Registration{{AOR: "1001@branch-042.outpost.example.com", Contact: "sip:1001@192.168.1.50:5060;transport=udp;rinstance=8c1f0a2b9d3e4f56",
		Source: "udp:192.168.1.50:5060", ExpiresInS: 3599, UserAgent: "Zoiper rv2.10.20.6 (Linux; x86_64) build 12345"}}
}

func (busyBox) Calls(context.Context) []api.Call {
	return []api.Call{{ID: "6b8e5c3a-0f2d-4c1e-9a7b-3d5f8e2c1a40@192.168.1.50", From: "1001", To: "0049301234567", Target: "sip:0049301234567@pstn-gw-1.example.com:5060",
		Route: "pstn", State: "confirmed", Started: t0, Media: &[2]api.MediaLeg{{Packets: 123456, Lost: 12, JitterMs: 1.5, Protection: "rtp"},
			{Packets: 123000, Lost: 0, JitterMs: 0.8, Protection: "srtp:AES_CM_128_HMAC_SHA1_80"}}}}
}

func (busyBox) CDRs(context.Context, time.Time, int) ([]api.CDR, error) {
	return []api.CDR{{Started: t0, Caller: "1001", Dialled: "0049301234567", Route: "pstn", Target: "sip:pstn-gw-1.example.com:5060",
		Mode: "survivable", Code: 200, Disposition: "answered", DurationS: 125}}, nil
}

func (busyBox) History(context.Context) ([]api.Version, error) {
	return []api.Version{{Version: 12, AppliedAt: t0, Source: "outpostctl:/home/technician/branch-documents/branch-042-2026-11-29.json", Active: true}}, nil
}

func (busyBox) Config(context.Context, int64) (api.ConfigResponse, error) {
	return api.ConfigResponse{Version: api.Version{Version: 12},
		Document: json.RawMessage(`{"users":[{"extension":"1001","password":"<redacted>","name":"A & B"}]}`)}, nil
}

func runAt(t *testing.T, sock string, width int, asJSON bool, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cmd{cl: api.NewUnixClient(sock), out: &out, errOut: &errOut, width: width, json: asJSON}
	if err := c.run(t.Context(), args); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// TestTablesFit80Columns: at 80 columns every line of every table fits,
// shortened as each verb says; without a terminal (width 0) and with
// --json, nothing is lost.
func TestTablesFit80Columns(t *testing.T) {
	sock := serveUnix(t, busyBox{&fakeBox{}})
	for _, tc := range []struct {
		verb      []string
		has, lost []string // at 80 columns
	}{
		{[]string{"status"}, []string{"987654321", "branch-042.json"}, nil},
		{[]string{"registrations"}, []string{"AOR", "CONTACT", "EXPIRES IN", "sip:1001@192.168.1.5", "udp:192.168.1.50:5060"}, []string{"USER AGENT", "Zoiper"}},
		{[]string{"calls"}, []string{"CALL-ID", "FROM", "TO", "STATE", "confirmed", "0049301234567"}, []string{"MEDIA B", "srtp:AES_CM_128_HMAC_SHA1_80"}},
		{[]string{"cdr"}, []string{"STARTED", "CALLER", "DIALLED", "CODE", "DISPOSITION", "answered", "125s"}, []string{"sip:pstn-gw-1", "survivable"}},
		{[]string{"config", "history"}, []string{"VERSION", "…", "2026-11-29.json"}, []string{"/home/technician"}},
	} {
		narrow := runAt(t, sock, 80, false, tc.verb...)
		for _, l := range strings.Split(strings.TrimSuffix(narrow, "\n"), "\n") {
			if n := utf8.RuneCountInString(l); n > 80 {
				t.Errorf("%v: a line of %d columns:\n%s", tc.verb, n, l)
			}
		}
		for _, s := range tc.has {
			if !strings.Contains(narrow, s) {
				t.Errorf("%v at 80 columns lacks %q:\n%s", tc.verb, s, narrow)
			}
		}
		for _, s := range tc.lost {
			if strings.Contains(narrow, s) {
				t.Errorf("%v at 80 columns still shows %q:\n%s", tc.verb, s, narrow)
			}
		}
		full := runAt(t, sock, 0, false, tc.verb...)
		js := runAt(t, sock, 80, true, tc.verb...)
		for _, s := range tc.lost {
			if !strings.Contains(full, s) {
				t.Errorf("%v without a terminal lacks %q:\n%s", tc.verb, s, full)
			}
		}
		if !json.Valid([]byte(js)) || strings.Contains(js, "…") {
			t.Errorf("%v --json at 80 columns:\n%s", tc.verb, js)
		}
		if strings.Contains(full, "…") {
			t.Errorf("%v without a terminal is cut:\n%s", tc.verb, full)
		}
	}
}

func TestTableRendering(t *testing.T) {
	var b bytes.Buffer
	tw := &table{out: &b, width: 30}
	tw.Columns(col{min: 5}, col{drop: 1}, col{min: 4, keepEnd: true})
	tw.Write([]byte("NAME\tDROPPED\tPATH\nabcdefghijklmnop\tx\t/very/long/path/file.json\n"))
	// A second block, its columns wider than cutting alone can save:
	// the droppable one goes.
	tw.Columns(col{min: 10}, col{drop: 1}, col{min: 16})
	tw.Write([]byte("NAME\tDROPPED\tPATH\nabcdefghijklmnop\tx\t/very/long/path/file.json\n"))
	tw.Write([]byte("plain line stays whole even when it is longer than thirty\n"))
	tw.KeyValue()
	tw.Write([]byte("key\tthe value wraps at spaces under its column\nk2\tshort\n"))
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `NAME       DROPPED  PATH
abcdefgh…  x        …file.json
NAME          PATH
abcdefghijk…  /very/long/path…
plain line stays whole even when it is longer than thirty
key  the value wraps at spaces
     under its column
k2   short
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if got := wrap("a bb cccccccccc", 4); strings.Join(got, "|") != "a bb|cccc|cccc|cc" {
		t.Errorf("wrap: %q", got)
	}
}

// TestJSONNotHTMLEscaped: "<redacted>" and "&" come out as they are, from
// the API's handler through outpostctl, in --json and in the document
// printed for people.
func TestJSONNotHTMLEscaped(t *testing.T) {
	sock := serveUnix(t, busyBox{&fakeBox{}})
	for _, asJSON := range []bool{true, false} {
		out := runAt(t, sock, 0, asJSON, "config", "get")
		if !strings.Contains(out, `"<redacted>"`) || !strings.Contains(out, `"A & B"`) || strings.Contains(out, `\u00`) {
			t.Errorf("config get (json %v):\n%s", asJSON, out)
		}
	}
}
