package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// MediaResourceAdmin is what a Backend offers to take media resources out
// of selection administratively (outpostctl media-resources set).
type MediaResourceAdmin interface {
	// SetMediaResourceActive sets the administrative flag of every
	// resource of the MSR name, present and future; an inactive resource
	// is never chosen. ErrNotFound when no resource has that MSR name.
	SetMediaResourceActive(ctx context.Context, name string, active bool) (MediaResourceState, error)
}

// MediaResourceActive is the body of POST /api/v1/media-resources/{name}.
type MediaResourceActive struct {
	Active *bool `json:"active"` // required
}

// MediaResourceState is the answer of POST /api/v1/media-resources/{name}.
type MediaResourceState struct {
	MSR    string `json:"msr"`
	Active bool   `json:"active"`
	// Resources is how many resources (interfaces) the MSR has now.
	Resources int `json:"resources"`
	// Persistent is true when the flag is in the box's database and
	// outlives a restart.
	Persistent bool `json:"persistent"`
	// InactiveByDocument is true when the document's
	// media_resources.inactive lists the MSR: it stays inactive whatever
	// the box's own flag says.
	InactiveByDocument bool `json:"inactive_by_document,omitempty"`
}

// registerMediaResourceAdmin serves POST /api/v1/media-resources/{name}
// with {"active": bool}, when b is a MediaResourceAdmin.
func registerMediaResourceAdmin(mux *http.ServeMux, b Backend, h *handler) {
	m, ok := b.(MediaResourceAdmin)
	if !ok {
		return
	}
	mux.HandleFunc("POST /api/v1/media-resources/{name}", func(w http.ResponseWriter, r *http.Request) {
		var body MediaResourceActive
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.Active == nil {
			writeJSON(w, http.StatusBadRequest, ErrorBody{Error: `body must be {"active": true|false}`})
			return
		}
		st, err := m.SetMediaResourceActive(r.Context(), r.PathValue("name"), *body.Active)
		if err != nil {
			h.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
}

// SetMediaResourceActive makes the MSR name's resources active or
// inactive on the box (kept across its restarts).
func (c *Client) SetMediaResourceActive(ctx context.Context, name string, active bool) (st MediaResourceState, err error) {
	body := fmt.Appendf(nil, `{"active":%t}`, active)
	hdr := http.Header{"Content-Type": {"application/json"}}
	return st, c.Do(ctx, http.MethodPost, "/api/v1/media-resources/"+url.PathEscape(name), hdr, body, &st)
}
