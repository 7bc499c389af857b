package gateway

import "github.com/outpost/outpost/gateway/b2bua"

// RemoteAnchor is the B2BUA's: an Anchor that sets a bridge's media up on
// another box's MSR, falling back to fallback's Anchor when that fails
// (b2bua.B2BUA.RemoteAnchor). The appliance's MediaFunc returns it when
// media/selection chooses another box's MSR; the INVITEs to the MSR leave
// from the gateway's own listeners.
func (s *Server) RemoteAnchor(callID string, m b2bua.RemoteMSR, fallback func() (b2bua.Anchor, error), onFallback func(error), onDead func(reason string)) b2bua.Anchor {
	return s.b2b.RemoteAnchor(callID, m, fallback, onFallback, onDead)
}
