package gateway

import (
	"context"
	"time"

	"github.com/outpost/outpost/gateway/b2bua"
)

// The calls the B2BUA carries, as the appliance sees and steers them.

// Calls returns the calls in progress.
func (s *Server) Calls() []b2bua.CallInfo { return s.b2b.Calls() }

// Drain starts (on) or cancels (off) refusing new calls: they get 503 with
// a Retry-After up to deadline, while calls in progress go on. REGISTERs
// are still served, so phones stay registered until the box stops.
func (s *Server) Drain(on bool, deadline time.Time) { s.b2b.Drain(on, deadline) }

// Registered is how many users have a binding here: while draining, a
// pool member hands them over as their phones refresh.
func (s *Server) Registered() int { return len(s.reg.Present()) }

// Draining reports whether new calls are refused, and until when.
func (s *Server) Draining() (bool, time.Time) { return s.b2b.Draining() }

// WaitIdle blocks while draining until no call is in progress, or ctx ends.
func (s *Server) WaitIdle(ctx context.Context) error { return s.b2b.WaitIdle(ctx) }

// RemoteAnchor is the B2BUA's: an Anchor that sets a bridge's media up on
// another box's MSR, falling back to fallback's Anchor when that fails
// (b2bua.B2BUA.RemoteAnchor). The appliance's MediaFunc returns it when
// media/selection chooses another box's MSR; the INVITEs to the MSR leave
// from the gateway's own listeners.
func (s *Server) RemoteAnchor(callID string, m b2bua.RemoteMSR, fallback func() (b2bua.Anchor, error), onFallback func(error), onDead func(reason string)) b2bua.Anchor {
	return s.b2b.RemoteAnchor(callID, m, fallback, onFallback, onDead)
}
