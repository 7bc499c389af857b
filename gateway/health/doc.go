// Package health keeps the health of SIP targets — HQ pool members and
// local PSTN gateways — and holds the failover rule, so that target
// selection and the normal/survivable mode logic (docs/design.md §1) ask one place.
//
// Two kinds of evidence feed a Tracker:
//
//   - Active probes (ProbeResult, usually from a Prober sending SIP OPTIONS
//     every Interval): a target goes down after DownAfter failed probes in a
//     row and up again after UpAfter good ones. Shorter streaks change
//     nothing, so a flapping target does not flap the routing.
//   - Real traffic (Observe, with ClassifyForHealth): a Failure (transport
//     error, timeout, 5xx) blocks the target for BlockFor; a Success
//     unblocks it at once and counts as a good probe. When the block
//     expires the target is half-open: eligible again, and its next outcome
//     either re-blocks or clears it.
//
// Targets the Tracker has never heard of, and targets new to a Prober's
// set, start up: a freshly booted box routes normally until probes prove
// a target dead.
//
// Pick orders the candidates of one attempt (eligible first, in the
// caller's SRV order; if none is eligible, one at random so that traffic
// discovers a recovery), AllDown is the "every target failed" signal for
// the mode logic, Snapshot feeds `outpostctl status`, and Subscribe
// publishes every up/down and block/unblock transition without ever
// blocking the publisher (drop-oldest). Retryable is the one rule for
// moving an INVITE to the next target: only after 408, 503, 504 or no
// response. ClassifyAttempt applies that same rule to a call attempt's
// outcome as evidence (the PSTN gateways' blocks); ClassifyForHealth (any
// 5xx or no response is a failure) is what the HQ trunk reports.
//
// The package does not resolve DNS (gateway/resolve does, and orders by
// SRV priority and weight), does not send SIP (the gateway implements
// Pinger), does not move between SRV priority groups, and decides no mode:
// it reports, the callers decide. It imports only the standard library.
package health
