package api

import (
	"context"
	"net/http"
)

// ServiceLister is what a Backend offers about its users' services: the
// do-not-disturb and forwards in force, set by the document or from the
// phones by feature codes.
type ServiceLister interface {
	Services(ctx context.Context) []UserServices
}

// UserServices is one user's services in force, GET /api/v1/services
// (users with none set are left out).
type UserServices struct {
	Extension string `json:"extension"`
	DND       bool   `json:"dnd,omitempty"`
	// Forward numbers as dialled; "" = off.
	ForwardAlways   string `json:"forward_always,omitempty"`
	ForwardBusy     string `json:"forward_busy,omitempty"`
	ForwardNoAnswer string `json:"forward_no_answer,omitempty"`
	NoAnswerS       int    `json:"no_answer_s,omitempty"`
	// FromPhone names the settings in which a phone overrides the
	// document (dnd, forward_always, forward_busy, forward_no_answer).
	FromPhone []string `json:"from_phone,omitempty"`
}

// registerServices serves GET /api/v1/services when b is a ServiceLister
// (a read, so the status page's read-only handler has it too).
func registerServices(mux *http.ServeMux, b Backend) {
	s, ok := b.(ServiceLister)
	if !ok {
		return
	}
	mux.HandleFunc("GET /api/v1/services", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Services(r.Context()))
	})
}

// Services lists the users' services in force.
func (c *Client) Services(ctx context.Context) (out []UserServices, err error) {
	return out, c.Do(ctx, http.MethodGet, "/api/v1/services", nil, nil, &out)
}
