package b2bua

import (
	"errors"
	"time"
)

// Services is what a local user has set about the calls for them: do not
// disturb and call forwarding (always, when busy, when not answered). A
// forward is a number as a phone would dial it; it is routed when the
// call is forwarded, by the dial plan of the call's mode, so a forward to
// an HQ extension goes out over the PSTN in survivable mode.
type Services struct {
	DND bool
	// ForwardAlways, ForwardBusy and ForwardNoAnswer are the forwards; ""
	// is off. Busy covers do-not-disturb too (RFC 5806 "do-not-disturb").
	ForwardAlways, ForwardBusy, ForwardNoAnswer string
	// NoAnswerAfter is the ring time before ForwardNoAnswer; 0 =
	// Config.VoicemailAfter.
	NoAnswerAfter time.Duration
}

// Feature names one setting of Services that a phone changes by a
// feature code.
type Feature string

// The settings a phone can change.
const (
	FeatureDND             Feature = "dnd"
	FeatureForwardAlways   Feature = "forward_always"
	FeatureForwardBusy     Feature = "forward_busy"
	FeatureForwardNoAnswer Feature = "forward_no_answer"
)

// ServiceChange is one change a phone asked for: DND on or off, or a
// forward set to Number ("" = off).
type ServiceChange struct {
	Feature Feature
	On      bool   // FeatureDND
	Number  string // the forwards
}

// ServiceStore keeps the users' Services: the document's, as changed
// from the phones (the appliance persists the changes).
type ServiceStore interface {
	// Services are ext's settings in force now (the zero Services for an
	// extension that is not a local user).
	Services(ext string) Services
	// SetService records a change ext made from its phone; ErrNotLocal
	// when ext is not a local user.
	SetService(ext string, ch ServiceChange) error
	// IsUser reports whether ext is a local user (subscriptions to its
	// state are served).
	IsUser(ext string) bool
}

// ErrNotLocal is ServiceStore.SetService's answer for an extension that
// is not a local user.
var ErrNotLocal = errors.New("not a local user")

// maxForwards bounds the forwards one call follows (always, busy and no
// answer together); the next one, or a forward back to an extension the
// call already reached, is a loop (482).
const maxForwards = 5

// services are ext's Services, none without a store.
func (s *Settings) services(ext string) Services {
	if s.cfg.Services == nil {
		return Services{}
	}
	return s.cfg.Services.Services(ext)
}
