// Package siptarget is the one grammar for "where SIP requests go" in
// Outpost: HQ trunk targets, PSTN gateways, upstream registration targets,
// OPTIONS probes and MSR servers all parse their strings here, so every
// part accepts the same forms and names the same problems.
//
// # Grammar
//
//	target    = [ transport ":" ] hostport
//	transport = "udp" / "tcp" / "tls"            ; case-insensitive
//	hostport  = host [ ":" port ]
//	host      = hostname / IPv4address / "[" IPv6address "]"
//	port      = 1*5DIGIT                         ; 1..65535
//
// Examples: "udp:198.18.0.1:5060", "tcp:pbx.example.com", "tls:[2001:db8::1]",
// "198.18.3.2:5070", "hq.example.com", "[2001:db8::1]:5060".
//
//   - Without a transport prefix the caller's default applies (Parse's def;
//     "" means udp).
//   - Without a port the transport's default applies: 5060 for udp and tcp,
//     5061 for tls (RFC 3261 §19.1.2).
//   - An IPv6 address is always written in brackets. A bare "2001:db8::1" is
//     refused even without port or transport: with a port it would be
//     ambiguous ("2001:db8::1:5060"), and one rule is easier to state and to
//     validate than two. Zones ("[fe80::1%eth0]") are refused (a SIP URI
//     cannot carry them); an IPv4-mapped address ("[::ffff:198.18.0.1]")
//     stands for the IPv4 address.
//   - A host name follows RFC 3261 §25.1 (hostname): dot-separated labels of
//     letters, digits and '-', a label neither starting nor ending with '-'
//     and at most 63 bytes, the last label starting with a letter, at most
//     253 bytes in all, an optional trailing dot. Names are compared and
//     printed in lower case without the trailing dot. Underscores are not
//     host name characters (they appear in SRV owner names, not in hosts).
//
// Target.String prints the canonical form ("udp:198.18.0.1:5060",
// "tls:[2001:db8::1]:5061"), which Parse reads back to an equal Target, so
// a Target's String is a stable name for health state and logs.
//
// Strings that are not targets but share the punctuation split here too:
// SplitHostPort cuts the hostport of an appliance/config listen spec
// ("udp:wan0:5060", where the host may be an interface and port 0 means
// ephemeral) and leaves the judging to the caller; ParseExplicit reads
// addresses that have no default port (a HEP capture server). IsDigits is
// the one decimal-digits check of the code base.
//
// The package only parses and prints: it resolves no names (see
// gateway/resolve) and knows nothing of sockets or TLS configuration. Which
// transports a part can actually use is the part's business; a part that
// cannot use one refuses it when configured. It imports nothing of Outpost.
package siptarget
