// Package resolve locates the HQ SIP servers of an Outpost branch appliance
// per RFC 3263 §4 ("Client Usage": selecting the transport, port and IP
// address of the next hop) using DNS SRV records as RFC 2782 defines them,
// and keeps the answers in a TTL cache that survives a dead DNS.
//
// # Resolution
//
// With Config.Domain set and no Config.Static targets, Resolve queries the SRV
// RRset of the transport chosen in Config (RFC 3263 §4.1 leaves the transport
// to configuration here): _sip._udp, _sip._tcp or _sips._tcp (tls) under the
// domain; for tls, when _sips._tcp has no records, _sip._tls (the older
// form some servers still publish) is asked before A/AAAA.
// Config.SRVService replaces the label (e.g. _sipinternaltls._tcp for a
// Lync/Skype pool), with no second label. The SRV records are grouped by priority, lowest first; within a
// group they are ordered by RFC 2782's weighted random selection (records of
// weight 0 keep a small chance of coming first, as the RFC's algorithm gives
// them). Each SRV target is expanded to its A then AAAA addresses; when the
// SRV response carried address records for a target in its additional
// section, those are used and no further query is sent for that target. A
// single SRV record with target "." means the service is decidedly not
// available (ErrNoService). When the domain has no SRV records (NXDOMAIN or
// an empty answer), Resolve falls back to the A then AAAA records of the
// domain itself on the transport's default port: 5060, or 5061 for tls
// (RFC 3263 §4.2).
//
// With Config.Static targets (parsed by siptarget, so each has its own
// transport and port), SRV is not used: IP literals are returned as they
// are and names are resolved through A/AAAA; the targets keep their
// configured order and each gets its index as Priority, so a caller that walks
// priority groups fails over through them in order.
//
// NAPTR (RFC 3263 §4.1) is optional and deliberately skipped: the transport
// comes from configuration, which is what HQ publishes for branches.
//
// # DNS queries
//
// Queries go to Config.Servers, or, when it is empty, to the nameservers of
// the system resolver's configuration (Config.ResolvConf, /etc/resolv.conf
// by default, read again at each query that reaches DNS, so a DHCP renewal
// that rewrites it is followed; only its nameserver lines are used, no
// search list), with EDNS0 (1232-byte UDP payload) and the recursion-desired bit. A server that fails
// (network error, per-query timeout, SERVFAIL, REFUSED or any rcode other than
// NOERROR/NXDOMAIN) makes the query move on to the next server; the server
// that answered last is asked first next time. A truncated UDP answer is
// asked again over TCP. CNAME chains in answers are followed.
//
// # Cache and stale answers
//
// Answers are cached per query name and type for their TTL (the smallest TTL
// of the records used), clamped to [MinTTL, MaxTTL]. Negative answers
// (NXDOMAIN, NODATA) are cached per RFC 2308 (the SOA's TTL/MINIMUM, clamped).
// NXDOMAIN is an authoritative "no such name": it replaces a previous positive
// answer (for the SRV name it simply means "use A/AAAA").
//
// When every server is unreachable or fails, the last good answer for that
// name is served (stale) and Stale reports true; the resolver then waits
// MinTTL before asking DNS again for that name, so that a dead WAN costs one
// timeout per MinTTL rather than one per call. Once DNS answers again the
// entry is fresh and Stale reports false after the next Resolve. Concurrent
// misses for the same name share one query.
//
// The package is a leaf: it imports nothing else from Outpost but the
// siptarget grammar.
package resolve
