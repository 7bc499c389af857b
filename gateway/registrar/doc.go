// Package registrar is the box's local SIP registrar (RFC 3261 §10.3).
//
// Branch phones register here always, whatever the state of the WAN, so the
// registrar depends on nothing remote: users and their digest HA1 values come
// from the appliance's Config, bindings live in memory and are written behind
// to a Persister (SQLite in the appliance) so that a restart of outpostd keeps
// every phone reachable without it re-registering.
//
// What it does:
//   - digest authentication via gateway/digest (challenge algorithms in the
//     configured order, stale nonces, nonce-count replay protection);
//   - REGISTER processing: several contacts per AOR, per-contact expires,
//     Expires header vs parameter, "Contact: *" with "Expires: 0",
//     Call-ID/CSeq ordering, 423 with Min-Expires, 200 listing every binding;
//   - RFC 5626 outbound for phones on TCP or TLS: a REGISTER with
//     Supported: outbound and one Contact with reg-id and +sip.instance
//     gets Require: outbound and Flow-Timer (Config.FlowTimer, default
//     120 s: the phone's CRLF keep-alive period, which the gateway
//     answers) in its 200, and that binding is flow-bound
//     (Binding.Outbound): the gateway calls it only over the connection
//     it registered on, and once that is gone the caller gets 430 Flow
//     Failed (RFC 5626 §5.3) instead of a new connection toward a phone
//     behind NAT. More than one Contact with reg-id is a 400. Without
//     Supported: outbound reg-id only identifies the binding (instance
//     and reg-id replace the older one);
//   - failed-authentication budgets (below) and a registration-storm guard
//     (503 + Retry-After with jitter above a configured admission rate), so
//     that a thousand phones rebooting together are spread out instead of
//     timing out.
//
// # Authentication rules
//
// Nobody can lock a phone out. A REGISTER (or a call's INVITE) whose
// digest verifies is accepted, always; the budgets only change how
// failures are answered. In the order they are checked:
//
//   - A user name that is no user, or not the AOR's (the From user's for a
//     call), is 403 and spends the source IP's budget for strangers; once
//     that is spent such requests get 503 with Retry-After. A real user's
//     budget is untouched.
//   - A digest-uri that does not designate the Request-URI's resource is
//     400 (RFC 7616 §3.4.6), no budget spent: credentials computed for one
//     request must not authorize another. It must be a SIP(S) URI of the
//     Request-URI's scheme and, if it has a user part, the same user; the
//     host and port are not compared, because the box answers for any host
//     and clients sign different ones (SIPp signs "sip:BOX-IP:PORT").
//   - A nonce the box never issued (its HMAC does not verify, see
//     gateway/digest) gets a fresh challenge with stale=true, whether or not
//     the response would have been right, and spends nothing: anyone can
//     make one up, and since both cases get the same answer it is no oracle
//     for guesses either. A phone holding a nonce from before a restart
//     retries at once.
//   - A response without qop (RFC 2069) is refused unless
//     Config.AllowNoQop: a failed authentication, re-challenged.
//   - A replayed nonce count, another realm or algorithm get a fresh
//     challenge, an expired nonce a stale one; nothing is spent.
//   - A wrong response over a genuine nonce (a wrong password) is 403 and
//     spends the budget of that source IP and user name:
//     Config.AuthFailLimit failures a minute, refilled continuously. Once
//     spent, that pair's failures are answered 503 with Retry-After (the
//     time one failure takes to refill) and the episode is logged once.
//     Other users at that source and the user at other sources are not
//     affected, and the pair's correct credentials are still accepted.
//
// Throttling never delays or drops anything: the answer is computed at once,
// so the UDP read loop that calls HandleRegister is never held. The cost of
// "never refuse what verifies" is that the budget cannot cap how fast a
// guesser who ignores Retry-After is told "wrong": a cap an attacker can
// spend is a lockout the attacker can cause, since over UDP anyone can send
// from the phone's address. Guessing is logged and counted
// (Stats.AuthFailures, Stats.AuthBlocked); its resistance rests on the
// passwords' strength.
//
// Cost per registration (the gateway's fast path calls HandleRegister on
// the socket's read goroutine for every UDP REGISTER): the answers to a
// REGISTER are built by reply, which hands back the request's own Via,
// From, To (once tagged), Call-ID and CSeq header objects instead of
// copies (the fast path then writes them as the lines they arrived as);
// the Date header is made once a second; a binding copies the strings it
// keeps (the request's may be pieces of the whole datagram), and the
// write-behind takes the binding itself, since a binding is never changed
// once it is in the table (an update replaces it). A refresh that changes
// only the expiry is written only when the expiry last written has fallen
// a quarter of the interval behind (refresh.go: flash wear, and 5 % of a
// registration's CPU when every refresh was written).
//
// What it does not do: transport (the gateway owns sockets and the sipgo
// server), routing of calls to bindings (the B2BUA reads Lookup), and
// upstream registration at HQ. Outbound over UDP (STUN keep-alives on the
// SIP port) is not done: UDP registrations with Supported: outbound are
// plain ones (no Require: outbound, RFC 5626 §6 allows it); the
// flow-bound mark is not persisted (a restart drops every connection) and
// Path (RFC 3327) is not supported.
package registrar
