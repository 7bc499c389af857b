// Package b2bua is the back-to-back user agent of outpostd: it terminates
// the caller's INVITE (the A leg, sipgo's server-side dialog) and places
// one or more new calls (B legs, client-side dialogs with their own
// From/To/Call-ID/Contact), relaying the session between them. An answered
// call is a bridge of two parties (dialogs); in-dialog requests are built
// by this package (CSeq, route set, target refresh, Laddr), not by sipgo's
// dialog sessions.
//
// Beside calls it serves instant messages (message.go) and, for local
// users, their services: do-not-disturb and forwards set by feature codes
// (services.go, featurecode.go), hunt groups (groups.go), boss and
// delegates (delegation.go), call pickup (pickup.go), call park
// (park.go), and subscriptions to their state for busy lamps and
// presence (subscribe.go); each file says what it does and leaves out.
//
// The gateway registers OnInvite, OnAck, OnBye, OnRefer, OnUpdate and (for
// in-dialog OPTIONS) OnOptions with its sipgo.Server, calls Looped
// before it authenticates an INVITE, and hands the responses no client
// transaction takes to OnStrayResponse (its transaction layer's
// unhandled-response handler).
//
// Call set-up:
//
//   - The A leg gets 100 Trying from its transaction when nothing else
//     went out to it within 200 ms (RFC 3261 §17.2.1; sipgo's Timer_1xx,
//     and the same in gateway/fastpath), not at once: a callee that
//     rings sooner, as a branch phone does, spares the box a response a
//     call (4 % of a call's CPU, bench/RESULTS.md issue 16 item 1).
//     Max-Forwards 0 is refused with 483; B legs carry Max-Forwards
//     decremented by one. The Request-URI user is routed with the Router
//     (the dial plan): no route gives 404. A body other than
//     application/sdp gives 488.
//   - Loops get 482: every INVITE we send carries a per-call token
//     (X-Outpost-Loop); an INVITE that arrives with the token of a live
//     call is our own come back. A merged request (RFC 3261 §8.2.2.2: the
//     Call-ID, From tag and CSeq of an INVITE being set up, on another
//     branch) is refused the same way.
//   - Route "local": the callee's live contacts come from the Locator (none
//     gives 480). A contact registered with RFC 5626 outbound whose
//     connection is gone (Contact.FlowFailed) is not called: its leg
//     fails at once as 430 Flow Failed (RFC 5626 §5.3), which the caller
//     gets when no other fork does better, and which counts as
//     unreachable for voicemail. Every contact is called at once (forking) with the A
//     leg's SDP and Content-Type; 180/183 (with SDP) are relayed to the A
//     leg, any number of them (sipgo's WaitAnswer stops after 11
//     responses; waitAnswer resumes it, so an HQ ring group forking to
//     many phones keeps ringing and its 2xx is answered); the first 2xx
//     wins, is relayed to the A leg and the other forks are CANCELled. A
//     2xx from another fork behind a proxy (same INVITE, another To tag)
//     is ACKed and its dialog ended with a BYE (RFC 3261 §13.2.2.4;
//     forked2xx.go, acks.go). If every fork fails the A leg gets the best final
//     response (a 6xx at once; else 486 before other 3xx-4xx, before 480,
//     5xx, 408; 480 when no fork answered at all).
//   - Redirects (RFC 3261 §8.1.3.4): a 300, 301 or 302 from any target (a
//     fork, a gateway, HQ) makes its Contacts (sip: over udp or tcp) new
//     targets (a 305 sends the same request through the proxy its Contact
//     names). A sips: or transport=tls Contact is followed only from HQ
//     (or a redirect from HQ): the Trunk (TLSRedirector) resolves its host
//     with HQ's DNS and opens a connection verified for that host with
//     HQ's roots and client certificate; the box has no other TLS client
//     trust. The targets are
//     tried next, highest q first, one after another by the same retry rule
//     as gateways; a followed redirect is not an answer. At most 5 hops
//     deep and 16 redirect targets per ringing phase; a target already
//     tried in the phase is not tried again, so a loop (A → B → A) ends at
//     once with the last 3xx as the failure (answered 480). Other 3xx, and
//     a redirect with nothing left to try, count as 480: relaying one with
//     our own Contact would point the caller back at us.
//   - Route "hq": the targets Config.HQ (a Trunk) gives, in its order
//     (the primary pool's, then a backup pool's), with the same retry rule
//     as the PSTN gateways; every attempt's outcome is reported back to the
//     trunk (passive health). Per-call fallback: when every HQ target failed
//     by the retry rule (408, 503, 504, no response, transport error), or
//     the trunk has no target at all, and the Router implements HQFallback
//     with a decision for the number (hq.call_fallback: its survivable
//     route), that decision is rung at once in the same call; the CDR then
//     carries the new Route and Target, FallbackFrom "hq" and why. A
//     definite answer from HQ (404, 486, 603…) is the caller's answer. The
//     mode is not changed: the probes decide it.
//   - Route "pstn": Config.PSTNGateways are tried in order with the
//     decision's Target as Request-URI user; the next gateway is tried only
//     when health.Retryable says so (408, 503, 504, or no response within
//     Config.AttemptTimeout), or when the status is one of the route's
//     Failover.Retry5xx (Config.PSTNFailover, Config.HQFailover: also a
//     per-attempt timeout and a cap on the targets tried); any other
//     final response is relayed. If all
//     gateways fail the last answer is relayed (503 when none answered).
//     With Config.PSTNHealth, gateways that are blocked (their last attempt
//     failed by that same rule: health.ClassifyAttempt) or down by probes
//     are skipped; when every gateway is, one of them is tried at random
//     (health.Tracker.Pick, docs/design.md §1), and a success unblocks it.
//   - Config.Warning (the gateway's survivable-mode Warning, RFC 3261
//     §20.43) is added to every final response to an initial INVITE that
//     this package sends (not to the 487 sipgo sends after a CANCEL, nor
//     to the answers of an INVITE with Replaces).
//   - Config.RingTimeout without an answer CANCELs every B leg and answers
//     the A leg with 480. A CANCEL from the caller (answered by sipgo with
//     200 and 487) CANCELs every B leg; so does a BYE on the early dialog
//     (the INVITE then gets 487).
//   - Voicemail: for a local extension with voicemail (Router.Voicemail),
//     no answer within Config.VoicemailAfter, busy (486, 600) or
//     unreachable (no contact, 480, 408, 5xx, 3xx, no response) CANCELs the
//     forks, sends 181 to the caller and calls the pilot's decision with
//     Diversion (RFC 5806: the extension, reason no-answer / user-busy /
//     unavailable, counter=1). If the pilot fails too, the caller gets the
//     extension's own answer.
//   - The A leg's ACK for the 2xx is forwarded as the ACK of the winning B
//     leg (with the A leg's answer when the INVITE had no offer). A B leg
//     that answers after the call already has a winner (or was abandoned)
//     is ACKed and sent a BYE. A B leg stopped before it said anything is
//     CANCELled on its first response (RFC 3261 §9.1 forbids CANCEL before
//     one). A target silent for Config.AttemptTimeout (not even 100)
//     fails then, but its transaction lingers for another AttemptTimeout:
//     a late provisional gets its CANCEL, a late 2xx ACK and BYE.
//   - Early media with a late offer (an INVITE without SDP): the callee's
//     SDP in an 18x is its offer and goes through the Anchor as one (its
//     2xx repeats it), never to the caller untouched.
//   - RFC 4028 session timers, per dialog (a B2BUA ends both): B legs
//     carry Supported: timer, the caller's Session-Expires (else
//     Config.SessionExpires, default 1800 s) and a Min-SE no lower than
//     the caller's nor than 90 s; a B leg refused with 422 and Min-SE is
//     called again with both at that value (at most twice). A caller's
//     Session-Expires below 90 s gets 422 with Min-SE: 90 (the box's
//     Min-SE is the RFC's floor). The callee's dialog takes the interval
//     and refresher of its 2xx; a 2xx without Session-Expires (no timer
//     at the callee) makes the box the refresher at the interval it
//     asked for. The caller's dialog takes its own Session-Expires
//     (lowered to the callee's interval when shorter), else the callee's
//     interval, else Config.SessionExpires; the refresher is the one the
//     caller named, else the caller when it supports timer, else the
//     box; our 2xx says so (Session-Expires;refresher=, Require: timer
//     only to a caller that supports it).
//   - RFC 3262: B legs with an offer say Supported: 100rel. A callee's
//     reliable 18x (Require: 100rel, RSeq) is PRACKed by the box itself
//     (RAck, in the early dialog, CSeq above the INVITE's; a later
//     in-dialog request continues above it); a retransmission of one
//     already PRACKed is not relayed again; its SDP is the callee's
//     answer, and a 2xx without SDP gives the caller that answer. Toward
//     the caller an 18x is relayed unreliably unless its INVITE had
//     Require: 100rel: then every relayed 18x goes with Require: 100rel
//     and RSeq, retransmitted (T1 doubling to T2) until the caller's
//     PRACK or 64*T1; while one waits for its PRACK a later 18x is not
//     relayed (RFC 3262 §3: one outstanding at a time), and our 2xx waits
//     (bounded by 64*T1) for the PRACK of one that carried SDP. With a
//     late offer (no SDP in the caller's INVITE) such 18x go without
//     SDP (the caller's PRACK would carry an answer the callee cannot
//     get). A PRACK naming no provisional we sent (unknown dialog, RSeq
//     or CSeq) gets 481 (OnPrack). Supported: 100rel alone changes
//     nothing toward the caller.
//
// Answered calls:
//
//   - BYE from either party is answered 200 and sent to the other party.
//   - re-INVITE from either party is relayed as a re-INVITE in the other
//     party's dialog; the other party's answer comes back in our 2xx. The
//     relayed leg's 2xx is ACKed by the B2BUA (the sender's ACK is absorbed,
//     or, for an offerless re-INVITE, carries the answer on). A re-INVITE
//     repeating the sender's last SDP byte for byte (a session refresh) is
//     answered here with what the sender last got. One offer/answer
//     exchange at a time per call: a party's second offer while its first
//     is unanswered gets 500 with Retry-After (RFC 3261 §14.2, RFC 3311
//     §5.2), an offer crossing one we sent it (the other party's, a
//     transfer's) 491; an unknown dialog 481, a lower CSeq 500, a non-SDP
//     body 488. Our ACK to the other party's 2xx is sent again for each
//     retransmission of that 2xx within 2 to 3 s (RFC 3261 §13.2.2.4),
//     as for initial INVITEs: the ACK is kept, not the transaction
//     (acks.go; the gateway hands such a 2xx to OnStrayResponse). The
//     other party's refusal is relayed; its 481, 408 or silence ends the
//     call (Dead). A CANCEL of the sender's re-INVITE CANCELs ours.
//   - UPDATE (RFC 3311) with an offer is relayed the same way; without a
//     body it is a refresh, answered here.
//   - Media hook: every SDP offer and answer (initial INVITE, 18x, 2xx,
//     re-INVITE and UPDATE both ways, transfers) passes through the call's
//     Anchor (Config.Media; nil = untouched) and the Anchor is closed on
//     every path that ends the bridge. Apart from that, SDP is relayed as
//     is, except that after a transfer the o= line a party sees keeps its
//     origin with the version raised (RFC 3264 §8).
//   - Media on another box's MSR (RemoteAnchor, which the MediaFunc
//     returns when media selection chose that MSR): the first offer
//     opens one media connection per leg on the MSR's UA (an INVITE with
//     the offer for the offering leg; for the other leg, whose SDP is not
//     known yet, the same description made inactive, since the MSR
//     refuses INVITEs without an offer and must not send before that leg
//     answers), then joins them on the MSR's control channel
//     (MediaControl: msc-mixer join). Each leg is offered or answered the
//     MSR's address, port and codecs for its connection under an o= line
//     of ours (version raised on change), in the direction the other leg
//     asked; a leg's answer re-INVITEs its connection (the MSR then sends
//     there), later offers re-INVITE the offerer's. Decision: this
//     sequence rather than waiting for leg B's answer before the second
//     INVITE, because the Anchor must hand leg B an offer at once; the
//     join happens at the first offer, so that every failure of the MSR
//     (no answer within 4 s, an error response, the join refused, the
//     control channel down) is known before anything is sent to a leg and
//     the bridge falls back to the local relay (the MediaFunc's fallback).
//     Whatever was opened is BYEd on every path; Close BYEs both. A BYE
//     from the MSR ends the call (the MediaFunc's onDead), like the
//     relay's inactivity. Not done: a refused re-offer is not rolled back
//     on the MSR; a failure after the first offer is not recovered (that
//     exchange is refused); both legs are always on one MSR; the INVITEs
//     go over UDP only, from the listener Config.LocalFor gives; the
//     other leg is offered only the codec the MSR chose from the first
//     offer (media/msr answers with one), plus telephone-event.
//   - SDP is read (o=, directions) and edited (that o= line, a
//     transfer's sendrecv offer) only with media/sdprewrite, the code
//     base's one SDP reader: a pure leaf, the one media package this
//     package imports (docs/design.md §2's test allows exactly that edge); the
//     relay itself stays behind the Anchor interface. An edited body is
//     written with CRLF line ends.
//   - REFER (RFC 3515) from a party, answered 202, with NOTIFYs
//     (message/sipfrag) "100 Trying" and the final status. Blind (Refer-To
//     without Replaces): the Refer-To user is routed like a dialled number
//     (a party that is not a local user may only transfer to local users)
//     and called from the transferee with the transferee's last SDP made
//     sendrecv and Referred-By; the answer is given to the transferee in a
//     re-INVITE. Attended (Replaces naming another answered dialog of ours):
//     the other party of that call is re-INVITEd with the transferee's SDP
//     and the transferee with its answer. On success the transferor's legs
//     get a BYE (it may also hang up first); on failure the call goes on. A
//     Replaces naming a dialog that is not ours is passed on in a blind
//     transfer's INVITE. The named dialog's party must be the transferor
//     itself (RFC 3891 §6: the REFER's dialog and the named one share a
//     participant); otherwise the NOTIFY says 403 and both calls go on.
//     A REFER that overtakes the transferor's ACK of the named dialog's
//     2xx waits for that ACK (up to 64*T1) rather than failing with 491.
//   - INVITE with Replaces (RFC 3891) naming an answered dialog of ours:
//     the new caller takes the named party's place (the other party is
//     re-INVITEd with its offer); the replaced party gets a BYE. Unknown
//     dialog 481, early-only 486, no offer 488. Only the replaced party
//     itself may send it (RFC 3891 §6), anyone else gets 403: identity is
//     the extension for local users (the gateway authenticated the From
//     user; registered contacts are called by extension) and the source IP
//     for trunk peers (a PSTN gateway or HQ is the UA holding its dialogs,
//     whatever numbers it carries), so a local user may move a call to
//     another of its phones, and a stranger cannot take over a call.
//   - Admission: beyond Config.MaxCalls calls in progress (default 4000) a
//     new INVITE gets 503 with Retry-After, so a flood cannot grow memory
//     without bound.
//   - Session timers of answered calls (RFC 4028, negotiated at set-up,
//     each party on its own; a transferred party keeps its own): where
//     the box is the refresher it refreshes at half the interval, with an
//     UPDATE without body when the party's Allow lists UPDATE, else a
//     re-INVITE repeating the description it last got from us (run as one
//     of the call's offer/answer exchanges, so never across another; a
//     busy call or a passing refusal is retried 2 s later, a 422 raises
//     the interval, 405/501 to UPDATE falls back to re-INVITE; 408, 481
//     or no answer ends the call, Dead). Where the party is the refresher
//     and no refresh came, the call is ended (BYE both legs, Dead) the
//     smaller of 32 s and a third of the interval before it expires (RFC
//     4028 §10). Every re-INVITE or UPDATE answered 2xx, either way,
//     refreshes its dialog; a party's refresh carrying Session-Expires
//     resets interval and refresher, one without leaves them; a refresh
//     below 90 s gets 422. Relayed re-INVITEs and UPDATEs carry the
//     receiving dialog's Session-Expires. Tests shorten the second of
//     Session-Expires (the unexported sessionUnit), never the values.
//   - Dead calls: every Config.KeepAlive both parties get an in-dialog
//     OPTIONS; 408, 481 or no answer ends the call (BYE to both, Dead):
//     a probe for phones whose dialogs have no timer. In-dialog OPTIONS to us get 200 for
//     a live dialog and 481 otherwise (over UDP only once the gateway's
//     stateless OPTIONS fast path lets in-dialog OPTIONS through).
//   - CDR: Config.OnEnd gets one CDR per call (a bridge made by a transfer
//     is a call of its own) on every end path.
//
// Ownership: OnInvite's goroutine (a sipgo handler) owns the call until
// the A leg has its final response; B legs still owing their last event
// (a CANCEL waiting for its 487) are drained by a goroutine of their own.
// An answered call then lives in the B2BUA's maps with no goroutine of
// its own: its keep-alive and its parties' session timers are timers
// (time.AfterFunc) whose function runs only when due, and it is ended by
// whichever handler or timer ends it (end runs once). Every goroutine and
// armed timer is counted in inflight and ends with its call. Once the
// caller has ACKed and the callee has our ACK, the call drops what set it
// up (call.setupDone: the INVITEs, 2xx and sipgo dialog sessions of both
// legs) and keeps its parties' dialog state: 10 KiB of the 24 a call up
// held (bench/RESULTS.md, issue 16 item 1). sipgo's transactions keep
// their own references for their timers (2 s: gateway retainFinished),
// so the re-ACK of a retransmitted 2xx still works.
//
// State and locks: a call owns its parties. A party's mutable state (the
// bridge it is in and its leg, its dialog state: remote target, remote
// CSeq, gone; its offer/answer state: the SDP it sent and got, their o=
// lines; its session timer; its sipgo session until setupDone) is
// guarded by call.mu of its home call (party.home), the same lock that
// guards the call's own state (parties, Anchor, exchanges, transferor,
// CDR, CallInfo, keep-alive, the setup once the call is up). A party's
// identity and routing (party.dialog) are set when it is made and only
// read. A transfer moves a party to the new bridge's call while holding
// the old call's lock (party.attachLocked); party.lock finds the current
// home. A dialog outside any bridge (a remote MSR's media connection, a
// fork's 2xx) has a home of its own that is never listed (loneHome).
// Decision: a lock per call rather than a goroutine per call, since an
// answered call runs no goroutine (see Ownership) and its handlers and
// timers already run on sipgo's and the runtime's goroutines; the lock
// is held for field updates only.
//
// The locks, in the order they may be taken:
//
//  1. msrAnchor.mu (a remote MSR Anchor): held while it re-INVITEs its
//     MSR dialogs and while it calls its fallback Anchor, so it may take
//     those dialogs' home locks (lone homes, never a listed call's) and
//     the relay's own locks.
//  2. call.mu: one per call. No two are ever held at once (a transfer
//     takes the old call's, lets go, then the new one's). Never held
//     across a network write, a wait, an Anchor method, Config.OnEnd or
//     Config.Media, or any call into sipgo (tx.Respond, the client,
//     dialog sessions): handlers copy what they need and unlock first.
//  3. B2BUA.mu: the B2BUA's maps (calls, parties, loops, merged), the
//     drain and the count of calls ending. It may be taken under a
//     call.mu; nothing is taken under it (Calls copies the list, then
//     reads each call's CallInfo under that call's lock).
//  4. Leaf locks, each guarding only its own fields and taking nothing
//     else: ringer.mu (a ringing phase's legs and winner),
//     reliableState.mu and uasReliable.mu (RFC 3262 state of a B leg and
//     of the caller), ackStore.mu (kept ACKs).
//
// Counters and flags read without a lock are atomics: party.cseq (our
// CSeq), party.conf.acked, exchange.answered, B2BUA.inflight,
// B2BUA.set and B2BUA.follow; a party's confirmed channel is closed once.
//
// Socket choice: B-leg UDP requests to a registered phone are pinned
// (sip.Request.Laddr) to the listener its REGISTER arrived on
// (Contact.Local: a NAT lets in only what comes from there); other B legs
// to Config.LocalFor's choice, Config.LocalAddr, or the listener the
// A-leg INVITE arrived on;
// requests to the caller leave from the listener its INVITE arrived on.
// Requests go to the binding's source address (NAT) and in-dialog
// requests to the source of the party's INVITE or 2xx, unless a route set
// says otherwise.
//
// Authentication is the gateway's: it only hands this package INVITEs from
// local users who answered a 407 challenge (registrar.AuthorizeCall), or
// calls from the PSTN gateways (InboundInvite). A new call is set up
// under one Policy (the Settings Prepare made of one push, and a Router of
// the same push), kept until it ends: a push applies to the next call,
// and a call never mixes two pushes. The gateway hands each INVITE the
// Policy it admitted it under; the B2BUA asks Follow's function for the
// bridges transfers make.
//
// Not yet done:
//   - redirects to tel: URIs, and over TLS from targets other than HQ's
//     (skipped); a TLS redirect target whose connection closes is dialled
//     again by sipgo, verified for HQ's names only; UDP and TCP redirect
//     targets are called wherever the Contact says (no policy limits them
//     to known peers);
//   - INFO, early-dialog UPDATE, offerless INVITE with Replaces; a
//     transfer target does not get voicemail forwarding;
//   - 100rel (RFC 3262): offers and answers in PRACK and its 2xx
//     (early offer/answer beyond the first answer in a reliable 18x),
//     reliable 18x toward a caller that sent no offer carry no SDP, a
//     caller that never PRACKs is not refused with 5xx (retransmissions
//     just stop after 64*T1), and B legs without an offer do not offer
//     100rel;
//   - session timers: a refresh re-INVITE's answer that changes the
//     party's media is noted but not relayed; a caller refused by the
//     callee's 422 beyond its own Session-Expires keeps its own interval
//     (each dialog on its own); a party that replaced another (INVITE
//     with Replaces) gets no timer of its own;
//   - Refer-Sub: false (RFC 4488) and REFERs to other methods than INVITE;
//   - after a transfer, the transferee's answer to the re-INVITE carrying
//     the new party's session is not passed on (the new party already has
//     the transferee's last SDP);
//   - a drain/Close that ends active calls on shutdown or reconfiguration;
//   - TCP legs are untested (only UDP requests are pinned to a listener);
//     a target silent for twice AttemptTimeout that answers later anyway
//     is not ACKed (its transaction is ended by then).
package b2bua
