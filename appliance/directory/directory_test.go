package directory

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

var users = []Entry{
	{Name: "Борис Петров", Extension: "103"},
	{Name: "anna smith", Extension: "101", DID: "+15555550101"},
	{Extension: "199"},
	{Name: "Carl & <Co>", Extension: "102"},
}

func get(t *testing.T, h http.Handler, path string) (int, string, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header().Get("Content-Type"), string(body)
}

func TestSearch(t *testing.T) {
	names := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Extension)
		}
		return out
	}
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"", []string{"199", "101", "102", "103"}}, // by shown name: "199", "anna…", "Carl…", "Борис…"
		{"ANNA", []string{"101"}},
		{"5550101", []string{"101"}},
		{"10", []string{"101", "102", "103"}},
		{"борис", []string{"103"}},
		{"nobody", nil},
	} {
		if got := names(Search(users, c.q)); !slices.Equal(got, c.want) {
			t.Errorf("Search(%q) = %v, want %v", c.q, got, c.want)
		}
	}
}

// Every XML format reads back, with the names escaped, as the phones'
// parsers expect it.
func TestFormats(t *testing.T) {
	h := Handler(func() []Entry { return users })
	type ipPhone struct {
		Entries []struct {
			Name      string   `xml:"Name"`
			Telephone []string `xml:"Telephone"`
		} `xml:"DirectoryEntry"`
	}
	for _, root := range []string{"yealink", "cisco"} {
		code, ctype, body := get(t, h, "/directory/"+root+"?q=carl")
		var doc ipPhone
		if err := xml.Unmarshal([]byte(body), &doc); code != 200 || err != nil || !strings.HasPrefix(ctype, "text/xml") {
			t.Fatalf("%s: %d %s %v\n%s", root, code, ctype, err, body)
		}
		if len(doc.Entries) != 1 || doc.Entries[0].Name != "Carl & <Co>" || !slices.Equal(doc.Entries[0].Telephone, []string{"102"}) {
			t.Errorf("%s: %+v", root, doc)
		}
	}
	_, _, body := get(t, h, "/directory/yealink?q=anna")
	if !strings.Contains(body, "<YealinkIPPhoneDirectory>") || !strings.Contains(body, "<Telephone>+15555550101</Telephone>") {
		t.Errorf("Yealink entry with a DID:\n%s", body)
	}
	_, _, body = get(t, h, "/directory/polycom")
	var pc struct {
		Items []struct {
			FN string `xml:"fn"`
			CT string `xml:"ct"`
		} `xml:"item_list>item"`
	}
	if err := xml.Unmarshal([]byte(body), &pc); err != nil || len(pc.Items) != 4 || pc.Items[0].FN != "199" || pc.Items[3].CT != "103" {
		t.Errorf("Polycom: %v %+v\n%s", err, pc, body)
	}
	if _, ctype, body := get(t, h, "/directory/json?q=nobody"); body != "[]" || ctype != "application/json" {
		t.Errorf("empty JSON search: %s %q", ctype, body)
	}
}

func TestBadRequests(t *testing.T) {
	h := Handler(func() []Entry { return users })
	if code, _, _ := get(t, h, "/directory/vcard"); code != http.StatusNotFound {
		t.Errorf("unknown format: %d", code)
	}
	if code, _, _ := get(t, h, "/directory/json?q="+strings.Repeat("x", maxQuery+1)); code != http.StatusBadRequest {
		t.Errorf("long query: %d", code)
	}
}
