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
//   - per-source failed-authentication limiting (guessing a password becomes
//     slow and is logged) and a registration-storm guard (503 + Retry-After
//     with jitter above a configured admission rate), so that a thousand
//     phones rebooting together are spread out instead of timing out.
//
// What it does not do: transport (the gateway owns sockets and the sipgo
// server), routing of calls to bindings (the B2BUA reads Lookup), and
// upstream registration at HQ.
package registrar
