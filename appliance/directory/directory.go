// Package directory serves the branch's users (name, extension, DID) as a
// phone directory, in the formats desk phones fetch over HTTP:
//
//	/directory/yealink  YealinkIPPhoneDirectory (Yealink remote phonebook)
//	/directory/cisco    CiscoIPPhoneDirectory (Cisco XML services)
//	/directory/polycom  directory/item_list (Polycom contact directory)
//	/directory/json     a JSON array, for scripts and the status page
//
// ?q= narrows the list to the entries whose name, extension or DID
// contains it (case-insensitive), so a phone's search key works without
// the WAN. The list is the document's users, sorted by name then
// extension; a user without a name is listed by its extension.
//
// The package renders; it does not authenticate. The status page mounts
// it behind its own HTTP Basic check (appliance/statuspage).
package directory

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"slices"
	"strings"
)

// Entry is one user in the directory.
type Entry struct {
	Name      string `json:"name"`
	Extension string `json:"extension"`
	DID       string `json:"did,omitempty"`
}

// maxQuery bounds ?q=: longer than any name or number in a document.
const maxQuery = 128

// Handler serves GET /directory/{format} from the entries list returns
// (read on every request, so a push shows at once). An unknown format is
// 404, a query over maxQuery bytes 400.
func Handler(list func() []Entry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /directory/{format}", func(w http.ResponseWriter, r *http.Request) {
		render, ok := formats[r.PathValue("format")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query().Get("q")
		if len(q) > maxQuery {
			http.Error(w, "query too long", http.StatusBadRequest)
			return
		}
		body, ctype, err := render(Search(list(), q))
		if err != nil {
			http.Error(w, "directory: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(body)
	})
	return mux
}

// Search returns the entries matching q (all for ""), sorted.
func Search(entries []Entry, q string) []Entry {
	q = strings.ToLower(strings.TrimSpace(q))
	var out []Entry
	for _, e := range entries {
		if q == "" || strings.Contains(strings.ToLower(e.Name), q) || strings.Contains(strings.ToLower(e.Extension), q) ||
			strings.Contains(e.DID, q) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.label()), strings.ToLower(b.label())), cmp.Compare(a.Extension, b.Extension))
	})
	return out
}

// label is the name a phone shows.
func (e Entry) label() string { return cmp.Or(e.Name, e.Extension) }

// numbers are the entry's numbers, the extension first.
func (e Entry) numbers() []string {
	if e.DID == "" {
		return []string{e.Extension}
	}
	return []string{e.Extension, e.DID}
}

type renderer func([]Entry) ([]byte, string, error)

var formats = map[string]renderer{
	"json":    renderJSON,
	"yealink": renderYealink,
	"cisco":   renderCisco,
	"polycom": renderPolycom,
}

const xmlType = "text/xml; charset=utf-8"

func renderJSON(es []Entry) ([]byte, string, error) {
	if es == nil {
		es = []Entry{}
	}
	b, err := json.Marshal(es)
	return b, "application/json", err
}

// ipPhoneEntry is a DirectoryEntry of the Yealink and Cisco formats: a
// name and its numbers.
type ipPhoneEntry struct {
	Name      string   `xml:"Name"`
	Telephone []string `xml:"Telephone"`
}

func ipPhoneEntries(es []Entry) []ipPhoneEntry {
	out := make([]ipPhoneEntry, len(es))
	for i, e := range es {
		out[i] = ipPhoneEntry{Name: e.label(), Telephone: e.numbers()}
	}
	return out
}

func renderYealink(es []Entry) ([]byte, string, error) {
	doc := struct {
		XMLName xml.Name       `xml:"YealinkIPPhoneDirectory"`
		Entries []ipPhoneEntry `xml:"DirectoryEntry"`
	}{Entries: ipPhoneEntries(es)}
	return marshalXML(doc)
}

func renderCisco(es []Entry) ([]byte, string, error) {
	doc := struct {
		XMLName xml.Name       `xml:"CiscoIPPhoneDirectory"`
		Title   string         `xml:"Title"`
		Prompt  string         `xml:"Prompt"`
		Entries []ipPhoneEntry `xml:"DirectoryEntry"`
	}{Title: "Directory", Prompt: "Select an entry", Entries: ipPhoneEntries(es)}
	return marshalXML(doc)
}

// polycomItem is one contact of the Polycom directory: first name, last
// name (empty: the whole name is the first), contact number.
type polycomItem struct {
	FirstName string `xml:"fn"`
	LastName  string `xml:"ln"`
	Contact   string `xml:"ct"`
}

func renderPolycom(es []Entry) ([]byte, string, error) {
	var items []polycomItem
	for _, e := range es {
		items = append(items, polycomItem{FirstName: e.label(), Contact: e.Extension})
	}
	doc := struct {
		XMLName xml.Name      `xml:"directory"`
		Items   []polycomItem `xml:"item_list>item"`
	}{Items: items}
	return marshalXML(doc)
}

func marshalXML(v any) ([]byte, string, error) {
	b, err := xml.MarshalIndent(v, "", " ")
	if err != nil {
		return nil, "", err
	}
	return append([]byte(xml.Header), append(b, '\n')...), xmlType, nil
}
