package b2bua

import (
	"time"

	"github.com/outpost/outpost/gateway/dialplan"
)

// Disposition is how a call ended, for the CDR.
type Disposition string

// Dispositions.
const (
	Answered     Disposition = "answered"      // a callee answered; the call ended by a hang-up
	Busy         Disposition = "busy"          // the callee was busy (486, 600) and had no voicemail
	NoAnswer     Disposition = "no-answer"     // nobody answered within the ring time
	Failed       Disposition = "failed"        // refused (404, 403, 488...), or broke before it was up
	Cancelled    Disposition = "cancelled"     // the caller gave up before the answer
	Unreachable  Disposition = "unreachable"   // no contact, 480, or no target answered at all
	Transferred  Disposition = "transferred"   // answered, then handed on by REFER
	Voicemail    Disposition = "voicemail"     // forwarded to the voicemail pilot, which answered
	Dead         Disposition = "dead"          // a leg stopped answering in-dialog requests
	MediaTimeout Disposition = "media-timeout" // the Anchor reported the media dead
	Service      Disposition = "service"       // a feature code the box answered itself (featurecode.go)
)

// Who ended a call, for CDR.HangupBy.
const (
	ByCaller = "caller"
	ByCallee = "callee"
	BySystem = "system" // the B2BUA: timers, failures, transfers, dead legs
)

// CDR is the record of one call, handed to Config.OnEnd exactly once when
// the call ends, whatever ends it. A bridge made by a transfer is a call
// of its own: its Caller is the transferee, its Dialled the Refer-To user,
// and TransferOf the CallID of the call it came from.
type CDR struct {
	CallID string // the A leg's Call-ID; for a transfer bridge, the new leg's Call-ID (or a generated one)
	Start  time.Time
	Answer time.Time // zero when never answered
	End    time.Time

	Caller  string         // From user of the A leg
	Dialled string         // callee as dialled (Request-URI user)
	Target  string         // callee as routed: the number after the dial plan (the pilot for voicemail)
	Route   dialplan.Route // local, hq, pstn
	Rule    string         // the dial-plan rule that matched
	// Peer is the target that answered, or the last one tried: a contact
	// URI for local users, "udp:198.18.1.10:5060" for gateways and HQ.
	Peer string

	Status      int // final SIP status given to the caller (0 when none was sent)
	Disposition Disposition
	HangupBy    string // ByCaller, ByCallee or BySystem

	// ForwardedFrom is the first extension whose call was forwarded (to
	// voicemail or by the user's forward: Diversion), ForwardReason why
	// (RFC 5806: unconditional, user-busy, do-not-disturb, no-answer,
	// unavailable).
	ForwardedFrom string
	ForwardReason string
	// OnBehalfOf is the boss a delegate (Caller) called as.
	OnBehalfOf string
	// PickedUpBy is the user who picked the call up from another phone
	// (Target then names that user too).
	PickedUpBy string
	// Group is the hunt group the call rang (Target is then the member
	// who answered, or the group when nobody did).
	Group string
	// FallbackFrom is the route the call was first sent to when HQ failed
	// it and the per-call fallback took it elsewhere (Route then says
	// where, Target the translated number); FallbackReason says why, e.g.
	// "udp:198.18.1.10:5060: 503". Both empty without a fallback.
	FallbackFrom   dialplan.Route
	FallbackReason string
	TransferOf     string // CallID of the call this bridge was transferred from
}
