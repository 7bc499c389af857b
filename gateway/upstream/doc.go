// Package upstream registers the box's local users at the HQ registrar
// (docs/design.md §1, normal mode): for every user with at least one local
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
// Each REGISTER goes to its targets in order and moves on only after
// 408, 503, 504 or no response within Timeout — the failover rule of
// docs/design.md §1, shared with calls through health.Retryable — and every
// outcome at a Trunk target is reported back to the Trunk as passive
// health.
//
// # Sticky registrars
//
// With a Pool trunk (the gateway's HQ trunk is one), each user keeps one
// registrar, the Lync/Skype pool rule: its targets are ordered by SRV
// priority, and within one priority by rendezvous (highest-random-weight)
// hashing of the user over the targets. A target's score for a user is
// the first 8 bytes, big-endian, of SHA-256("sip:EXT@DOMAIN" || 0x00 ||
// "host:port") — the AOR and the target's address without transport —
// highest first. The score has no seed and no state, so the order is the
// same on every box and across restarts, whatever order DNS answers in;
// SRV weights are not used. The first target is the user's primary, the
// others its backups in order; the healthy ones (Candidate.Eligible) are
// tried, so refreshes never hop between equal targets, and a user moves
// to a lower priority only when its whole group failed. If none is
// healthy, the user's primary alone is tried (docs/design.md §1 tries one blocked
// target at random; the hash spreads users as randomly). Adding a target
// to a group of n moves about 1/(n+1) of the users, all to the new
// target; removing one moves only its users.
//
// Every Recheck (the gateway uses the probe interval) the Agent looks for
// users registered elsewhere than at their first healthy target and
// registers them there at once (paced): a user whose registrar went down
// moves to its next backup, and a user on a backup whose preferred
// registrar is healthy again moves back — after the new binding is
// accepted, the one left on the backup is withdrawn there (Expires: 0).
// A binding at a registrar that failed is not withdrawn: it expires, or
// is refreshed when the user comes back. A plain Trunk is used in its own
// order for every user.
//
// # Redirects
//
// A REGISTER answered 301 or 302 (a Lync Director sending the user to its
// home pool) is sent again to the Contact of the answer (highest q; host,
// port and transport from the SIP URI, sips meaning TLS), at most 5 hops
// in a row and never to a target the job already tried (a loop). The user
// then stays at that registrar — refreshes go there, not through the
// Director — until it fails: a failure by the retry rule or an error moves
// the user at once to the answer's next Contact (the home's backup, a
// lower q), kept for this, and only when none is left back to the normal
// order, within the same job; any other
// failure is retried later from the normal order. Redirect targets are
// not the Trunk's and are not reported to it. A TLS Contact named by host
// (a Lync pool on 5061) is connected through the Trunk when it is a
// TLSRedirector (the gateway's HQ trunk: HQ's DNS and TLS trust).
//
// # Digest and expiry
//
// Digest (RFC 7616, via icholy/digest): the last qop=auth challenge of
// each user is kept and the next request to the same target is
// authorised at once with the nonce count incremented, so a refresh is
// normally one transaction; a 401 with stale=true is answered once more,
// any other second 401 is a final failure. A 423 raises the requested
// expiry to Min-Expires once. Refreshes happen a tenth of the granted
// lifetime before expiry (at least 32 s, Timer B, so a silent target can
// be given up in time; at most half the lifetime).
//
// Call-ID is kept per user for the life of the process and CSeq grows
// (RFC 3261 §10.2.4). When the contact (a new WAN address) or the domain
// changes, Reconfigure re-registers everyone and each old binding is
// withdrawn after its replacement was accepted, so HQ never holds none.
//
// # Transports
//
// Targets carry their transport (udp, tcp, tls: the Trunk's names, or
// Config.Transport for bare ones); the Contact names it when it is not
// UDP, so HQ calls the box back the same way (the gateway gives the
// box's TCP or TLS listener as ContactHost then). With Config.Registrar
// (hq.domain) the Request-URI is sip:REGISTRAR, not the site's domain:
// a domain-routed HQ (a Lync pool) takes only requests for its domain.
// TLS itself (certificates, verification) is the transport layer's, set
// up by the gateway.
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
// user unreachable from HQ for the length of a reboot. It does not keep
// its own TCP/TLS connections or keep-alives: REGISTERs over TCP or TLS
// share sipgo's connection pool with the rest of the box.
package upstream
