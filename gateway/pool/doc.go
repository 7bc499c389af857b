// Package pool is the registrar pool's decisions and state: two or more
// boxes serving one branch with no shared state, as Lync/Skype pools do.
// Every member holds the same document; each user's members are ordered by
// rendezvous hashing of the user's address over the members' names
// (gateway/rendezvous), so every member computes the same primary and
// backups. Members learn each other's health by OPTIONS (a health.Tracker
// fed by a health.Prober).
//
// The rules (docs/design.md §3, `pool`):
//
//   - A user's home is the first member of its order that is serving:
//     this box always is; another member is when it is up and, if it has
//     ever been down, has stayed up for Hold since (failback waits for a
//     recovered member to prove itself, so phones do not flap).
//   - A REGISTER at a member that is not the user's home is answered 301
//     with the home's Contact (Redirect); the home accepts it. A backup
//     that holds the user's binding when the primary comes back redirects
//     the user's next refresh and drops the binding (the gateway does).
//   - A call to a user with no binding here goes to the other members that
//     are up, in the user's order (Peers); INVITEs between members carry an
//     HMAC-SHA256 over Call-ID, From and To users and a timestamp keyed by
//     the pool's secret (Sign, Verify) and are trusted only when they come
//     from a member's address and the signature verifies.
//
// It does not send or answer SIP (the gateway does, through the Pinger it
// hands in) and knows nothing of the registrar's bindings.
package pool
