package api

import (
	"context"
	"net/http"
	"time"
)

// VoicemailLister is what a Backend offers about the box's voicemail.
type VoicemailLister interface {
	Voicemail(ctx context.Context) (Voicemail, error)
}

// Voicemail is GET /api/v1/voicemail: the messages the box keeps and
// its counters.
type Voicemail struct {
	Messages []VoicemailMessage `json:"messages"`
	Stats    VoicemailStats     `json:"stats"`
}

// VoicemailMessage is one kept message (its audio is not served here).
type VoicemailMessage struct {
	ID         string    `json:"id"`
	Mailbox    string    `json:"mailbox"`
	Caller     string    `json:"caller,omitempty"`
	CallerName string    `json:"caller_name,omitempty"`
	Received   time.Time `json:"received"`
	DurationMS int64     `json:"duration_ms"`
	State      string    `json:"state"` // "new" or "saved"
	Delivered  time.Time `json:"delivered,omitzero"`
}

// VoicemailStats are the voicemail's counters since start.
type VoicemailStats struct {
	Recorded    uint64 `json:"recorded"`
	Empty       uint64 `json:"empty"`
	Full        uint64 `json:"full"`
	DiskFull    uint64 `json:"disk_full"`
	Failed      uint64 `json:"failed"`
	NoMedia     uint64 `json:"no_media"`
	TooLong     uint64 `json:"too_long"`
	GarbageDTMF uint64 `json:"garbage_dtmf"`
	BadPackets  uint64 `json:"bad_packets"`
	Recovered   uint64 `json:"recovered"`
	WrongPIN    uint64 `json:"wrong_pin"`
	PINLocked   uint64 `json:"pin_locked"`
}

// registerVoicemail serves GET /api/v1/voicemail when b is a
// VoicemailLister (a read: callers' numbers are as visible as in CDRs).
func registerVoicemail(mux *http.ServeMux, b Backend) {
	v, ok := b.(VoicemailLister)
	if !ok {
		return
	}
	mux.HandleFunc("GET /api/v1/voicemail", func(w http.ResponseWriter, r *http.Request) {
		out, err := v.Voicemail(r.Context())
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// Voicemail lists the box's messages and voicemail counters.
func (c *Client) Voicemail(ctx context.Context) (out Voicemail, err error) {
	return out, c.Do(ctx, http.MethodGet, "/api/v1/voicemail", nil, nil, &out)
}
