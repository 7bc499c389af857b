package gateway

import (
	"context"
	"time"
)

// Drain starts (on) or cancels (off) refusing new calls: they get 503 with
// a Retry-After up to deadline, while calls in progress go on. REGISTERs
// are still served, so phones stay registered until the box stops.
func (s *Server) Drain(on bool, deadline time.Time) { s.b2b.Drain(on, deadline) }

// Draining reports whether new calls are refused, and until when.
func (s *Server) Draining() (bool, time.Time) { return s.b2b.Draining() }

// WaitIdle blocks while draining until no call is in progress, or ctx ends.
func (s *Server) WaitIdle(ctx context.Context) error { return s.b2b.WaitIdle(ctx) }
