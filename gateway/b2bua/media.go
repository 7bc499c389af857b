package b2bua

import (
	"net/netip"
	"strings"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/media/sdprewrite"
)

// Leg names one side of a bridged call for an Anchor.
type Leg int

// The two sides of a bridge.
const (
	// LegA is the calling side: the caller, or the transferee in a bridge
	// made by a transfer.
	LegA Leg = iota
	// LegB is the called side: the callee, the voicemail pilot, or the
	// transfer target.
	LegB
)

func (l Leg) other() Leg { return 1 - l }

func (l Leg) String() string {
	if l == LegA {
		return "A"
	}
	return "B"
}

// Anchor is the media of one bridge (RFC 3264 offer/answer seen from the
// middle). Every SDP body the B2BUA relays passes through it: the offer of
// the initial INVITE, the answers in 18x and 2xx, the offers and answers
// of re-INVITEs and UPDATEs in both directions, and the offers built for a
// transfer. The returned SDP is what the other leg receives. An error
// refuses the exchange: the offering side gets 488.
//
// Calls on one Anchor are serialised by the B2BUA (one offer/answer
// exchange at a time per bridge); Close is called exactly once, on every
// path that ends the bridge (hang-up, failure, transfer to a new bridge).
type Anchor interface {
	// Offer rewrites an offer that arrived from leg from for the other leg.
	Offer(from Leg, sdp []byte) ([]byte, error)
	// Answer rewrites an answer that arrived from leg from (to the other
	// leg's offer) for the other leg.
	Answer(from Leg, sdp []byte) ([]byte, error)
	// Reject says that the last offer from leg from was refused or
	// abandoned: the session before it stays in force.
	Reject(from Leg)
	// Close releases the media of the bridge.
	Close()
}

// HoldAnchor is an Anchor that can hold a call for one leg: the other
// leg hears music on hold and nothing is sent toward the held-for leg,
// whose party left (a parked call, park.go). An Anchor without it parks
// in silence.
type HoldAnchor interface {
	HoldFor(l Leg, on bool)
}

// MediaFunc makes the Anchor of a new bridge. onDead, called by the
// anchor (at most once; later calls are ignored), ends the call with
// disposition media-timeout and the reason in the log. An error refuses
// the call with 488.
type MediaFunc func(br Bridge, onDead func(reason string)) (Anchor, error)

// Bridge is what the MediaFunc knows of a new bridge.
type Bridge struct {
	CallID string // the CDR's CallID
	// A and B are our local addresses facing each leg.
	A, B netip.Addr
	// EndA and EndB are who is on each leg, as far as the B2BUA knows
	// (the zero End when it does not: another pool member, a transfer).
	EndA, EndB End
	// Box: leg B is the box itself (its voicemail): the call is anchored
	// even on one segment, and leg B is plain RTP.
	Box bool
}

// End is the far end of a leg: a local user or a trunk.
type End struct {
	// Route is dialplan.RouteLocal for a local user, RouteHQ or RoutePSTN
	// for that trunk, "" unknown.
	Route dialplan.Route
	// Name is the local user's extension, or the PSTN gateway's target
	// (siptarget form: the first one tried, for a call to the PSTN).
	Name string
}

// readSDP reads a body the B2BUA relays with media/sdprewrite, the code
// base's one SDP reader (a pure leaf, allowed by docs/design.md §2's test): the
// B2BUA needs its o= line (party.outSDP) and its direction attributes
// (withSendrecv). ok is false when the body is empty or too large to be a
// session description.
func readSDP(sdp []byte) (*sdprewrite.SDP, bool) {
	s, err := sdprewrite.ParseAny(sdp)
	return s, err == nil
}

// withSendrecv turns every direction attribute into a=sendrecv: a session
// description remembered from a held call becomes a fresh offer for a new
// party (a transfer), which must not start on hold. A body that cannot be
// read is returned as it is.
func withSendrecv(sdp []byte) []byte {
	s, ok := readSDP(sdp)
	if !ok {
		return sdp
	}
	return s.WithSendRecv()
}

// isSDP reports whether a body with Content-Type ct can be relayed as a
// session description.
func isSDP(ct string) bool { return strings.EqualFold(mediaType(ct), "application/sdp") }

// mediaType is a Content-Type's type/subtype, parameters and spaces cut.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.TrimSpace(mt)
}

// endOf is the far end of the called leg of a call routed by d.
func (s *Settings) endOf(d dialplan.Decision) End {
	switch d.Route {
	case dialplan.RouteLocal:
		return End{Route: d.Route, Name: d.Target}
	case dialplan.RoutePSTN:
		if len(s.gateways) > 0 {
			return End{Route: d.Route, Name: s.gateways[0].String()}
		}
	}
	return End{Route: d.Route}
}
