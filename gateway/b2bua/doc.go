// Package b2bua is the back-to-back user agent of outpostd: it terminates
// the caller's INVITE (the A leg, sipgo's server-side dialog) and places
// one or more new calls (B legs, client-side dialogs with their own
// From/To/Call-ID/Contact), relaying the session between them.
//
// The gateway registers OnInvite, OnAck and OnBye with its sipgo.Server.
// Per call:
//
//   - The A leg gets 100 Trying at once. Max-Forwards 0 is refused with
//     483; B legs carry Max-Forwards decremented by one. The Request-URI
//     user is routed with the Router (the dial plan): no route gives 404.
//   - Route "local": the callee's live contacts come from the Locator (none
//     gives 480). Every contact is called at once (forking) with the A
//     leg's SDP and Content-Type; 180/183 (with SDP) are relayed to the A
//     leg; the first 2xx wins, is relayed to the A leg and the other forks
//     are CANCELled. If every fork fails the A leg gets the best final
//     response (a 6xx at once; else 486 before other 3xx-4xx, before 480,
//     5xx, 408; 480 when no fork answered at all).
//   - Route "hq": the targets Config.HQ (a Trunk) gives, in its order,
//     with the same retry rule as the PSTN gateways; every attempt's
//     outcome is reported back to the trunk (passive health).
//   - Route "pstn": Config.PSTNGateways are tried in order with the
//     decision's Target as Request-URI user; the next gateway is tried only
//     when health.Retryable says so (408, 503, 504, or no response within
//     Config.AttemptTimeout); any other final response is relayed. If all
//     gateways fail the last answer is relayed (503 when none answered).
//   - Config.RingTimeout without an answer CANCELs every B leg and answers
//     the A leg with 480. A CANCEL from the caller (answered by sipgo with
//     200 and 487) CANCELs every B leg.
//   - The A leg's ACK for the 2xx is forwarded as the ACK of the winning B
//     leg. A BYE from either side is answered with 200 and sent to the
//     other side; the call is then removed.
//   - A BYE from the caller on the early dialog CANCELs every B leg and
//     answers the INVITE with 487.
//   - A B leg that answers after the call already has a winner (or was
//     abandoned) is ACKed and sent a BYE.
//   - A B leg stopped before it said anything is CANCELled on its first
//     response (RFC 3261 §9.1 forbids CANCEL before one) and dropped if
//     none comes within Config.AttemptTimeout.
//
// Ownership: OnInvite's goroutine (a sipgo handler) owns the call until
// the A leg has its final response and every B-leg goroutine has sent its
// last event; an answered call then lives only in the B2BUA's maps and is
// ended by OnBye's goroutine. No goroutine outlives its call.
//
// Socket choice: B-leg UDP requests are pinned (sip.Request.Laddr) to
// Config.LocalAddr, or to the listener the A-leg INVITE arrived on; BYEs
// are built here with Laddr set because sipgo's in-dialog helpers do not
// copy it. Requests go to the binding's source address (NAT) and in-dialog
// requests to the source of the peer's response (DialogUA.RewriteContact).
//
// Authentication is the gateway's: it only hands this package INVITEs from
// local users who answered a 407 challenge (registrar.AuthorizeCall).
// Reconfigure applies to the next call; calls in progress keep theirs.
//
// Calls from the PSTN gateways arrive already routed (OnInboundInvite):
// the gateway resolves the DID to an extension with the inbound rules.
//
// Not yet done in this slice:
//   - survivable-mode voicemail forwarding on no answer / unreachable;
//   - following 3xx redirects (a fork's 3xx counts as 480),
//   - re-INVITE (refused with 488), UPDATE, REFER/transfer, INFO, PRACK
//     (100rel), session timers, late-offer SDP (ACK with SDP);
//   - media anchoring (SDP rewrite to the RTP relay), CDR records;
//   - a drain/Close that ends active calls on shutdown or reconfiguration;
//   - TCP legs are untested (only UDP requests are pinned to a listener);
//     a target dropped after AttemptTimeout that answers later anyway is
//     not ACKed (sipgo has already ended that transaction);
//   - health.Tracker feedback (ClassifyForHealth) from real B-leg traffic
//     and blocking of failed PSTN gateways.
package b2bua
