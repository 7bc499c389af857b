// Package upstream registers the box's local users at the HQ registrar
// (DESIGN.md §1, normal mode): for every user with at least one local
// binding, the HQ registrar holds sip:EXTENSION@SITE-DOMAIN with
// Contact: <sip:EXTENSION@BOX>, so that HQ can reach branch users through
// the box. The box answers HQ's digest challenges with its trunk
// credentials (hq.auth_username/auth_password), refreshes each binding
// before it expires, and withdraws it (Expires: 0) when the last local
// binding goes.
//
// # Design
//
// One Agent holds an entry per user and one min-heap of entries ordered
// by when each is next due (first registration, refresh, retry, replay).
// A single dispatcher goroutine takes due entries at most ReplayRate per
// second (a token bucket of depth one: no burst after idling) and hands
// them to a fixed pool of Workers; there is no goroutine and no timer
// per user, and a thousand phones cost a thousand small structs. Set and
// Remove only record a wish and wake the dispatcher, so the registrar
// never waits for HQ.
//
// Pause (survivable mode) cancels the REGISTERs in flight and sends
// nothing, while Set and Remove keep being recorded. Resume (failback)
// makes every entry due at once, in user order, and the pacer spreads
// them: 1000 users at 50/s reach HQ over 20 s instead of in one burst.
// Users removed during the pause are withdrawn then, if their binding
// at HQ has not expired already.
//
// Each REGISTER goes to the Trunk's targets in order and moves on only
// after 408, 503, 504 or no response within Timeout — the failover rule
// of DESIGN §1, shared with calls through health.Retryable — and every
// outcome is reported back to the Trunk as passive health. Digest
// (RFC 7616, via icholy/digest): the last qop=auth challenge of each user
// is kept and the next request to the same target is authorised at once
// with the nonce count incremented, so a refresh is normally one
// transaction; a 401 with stale=true is answered once more, any other
// second 401 is a final failure. A 423 raises the requested expiry to
// Min-Expires once. Refreshes happen a tenth of the granted lifetime
// before expiry (at least 32 s, Timer B, so a silent target can be given
// up in time; at most half the lifetime).
//
// Call-ID is kept per user for the life of the process and CSeq grows
// (RFC 3261 §10.2.4). When the contact (a new WAN address) or the domain
// changes, Reconfigure re-registers everyone and each old binding is
// withdrawn after its replacement was accepted, so HQ never holds none.
//
// # What it does not do
//
// It does not watch the local registrar (the registrar or the appliance
// calls Set, Remove and Sync), does not decide the mode (the appliance
// calls Pause and Resume), does not resolve DNS or keep target health
// (the Trunk does), and does not handle calls from HQ (the B2BUA does;
// the contact's user part is the extension, so an INVITE from HQ is
// routed like any call to a local user). On stop, bindings at HQ are
// left to expire rather than withdrawn: a restarting box registers them
// again, and withdrawing a thousand bindings would make every branch
// user unreachable from HQ for the length of a reboot.
package upstream
