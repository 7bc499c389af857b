// Package digest implements the server side of HTTP Digest access
// authentication as used by SIP: RFC 3261 §22 (SIP's use of Digest),
// RFC 7616 (HTTP Digest, obsoleting RFC 2617), and RFC 8760 (SHA-256 in SIP).
//
// It is built for a registrar's hot path: challenge generation, header
// parsing and verification are allocation-light and safe for concurrent use.
//
// # What it does
//
//   - Generates challenges (the value of WWW-Authenticate or
//     Proxy-Authenticate) for MD5 and SHA-256 with qop="auth", one per
//     configured algorithm, all sharing one nonce (RFC 8760 §2.4).
//   - Issues stateless nonces: base64url(issue time ‖ 8 random bytes ‖
//     truncated HMAC-SHA256). A nonce is accepted only if its MAC verifies
//     under the Authenticator's key and it is not older than the configured
//     TTL; a genuine but expired nonce yields Stale, so that a client that
//     knows the password is asked to retry with a fresh nonce (stale=true,
//     RFC 7616 §3.3) instead of being told its password is wrong.
//   - Parses the Authorization / Proxy-Authorization header value
//     (ParseCredentials) with a small hand-written parser that handles
//     quoted-string escapes, case-insensitive parameter names and garbage.
//   - Verifies the request-digest in constant time against a stored HA1
//     (passwords are never needed, only H(username:realm:password)).
//   - Enforces nonce-count replay protection for qop=auth: each nc is
//     accepted once per nonce, out-of-order arrival is tolerated within a
//     sliding window of 64 counts (as IPsec anti-replay, RFC 4303 §3.4.3).
//     The table is bounded by Config.MaxNonces (oldest entries evicted);
//     a nonce whose entry was evicted while still valid is answered Stale
//     rather than being accepted again.
//
// # What it does not do
//
//   - No transport and no SIP parsing: the caller extracts the header value,
//     passes the request method, and writes the response (401/407 with
//     Challenges, 403, ...) itself.
//   - No user store: the caller supplies a Lookup that returns the HA1 for a
//     username and algorithm.
//   - It does not compare the digest-uri with the Request-URI (RFC 3261
//     §22.4 leaves this to the server; proxies may rewrite the Request-URI).
//     Callers that want that check compare Credentials.URI themselves
//     (gateway/registrar does).
//   - It keeps no failure budgets. Authenticator.Issued tells a caller that
//     does whether a failed response was over a nonce this Authenticator
//     issued (a guess at the password) or over a made-up one (not).
//   - No qop=auth-int, no "-sess" algorithms, no userhash, no SHA-512-256,
//     no username* (RFC 8187) parameters.
//   - Without qop (RFC 2069 compatibility mode) there is no nonce count, so
//     a captured Authorization can be replayed until the nonce expires; set
//     Config.RequireQOP to refuse such responses.
//
// # Which challenges to offer
//
// RFC 8760 lets a server offer one challenge per algorithm, preferred
// first, and a client answer the first it supports; RFC 7616 §3.7 asks
// clients to skip the ones they do not know. Not all do: libre before 2.x
// (Debian 12's baresip) fails at the first unknown algorithm, so offering
// SHA-256 at all locks it out, and its INVITEs fail the same way. The box
// therefore offers MD5 alone unless the site asks for more (sip.digest).
// The trade-off: over TLS an eavesdropper sees no response, whatever the
// algorithm; over UDP and TCP a captured MD5 response is cheaper to guess
// the password from offline than a SHA-256 one, which matters for weak
// passwords (neither protects the request itself: qop=auth covers no
// header). A site whose phones all speak RFC 8760 lists "SHA-256" first.
// Both HA1 forms are stored for every user, so switching needs no new
// passwords.
//
// # Nonce key
//
// With a nil Config.Key a random key is generated, so nonces do not survive
// a restart: clients that reuse a nonce from before the restart get Stale
// (with a correct response) or BadResponse (and Issued reports false). Configure a persistent Key (at least 16 bytes) shared by all
// instances behind one address to avoid that.
package digest
