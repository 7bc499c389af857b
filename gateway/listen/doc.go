// Package listen holds the gateway's SIP listening sockets: the spec of
// one socket (transport and address), binding it (UDP with a large receive
// buffer; TCP behind connection limits, in all and per source, an IPv6 /64
// counting as one source, with a time limit per SIP message, the first
// one from the accept, and an idle timeout between messages: see
// tcplimit.go; TLS over the same limited TCP listener, the TLS layer
// inside the limits so that the message deadline, the framer and the
// trace tap see plain SIP), reconciling a new set of specs with the sockets already
// bound (an unchanged spec keeps its socket), and waiting until sipgo has
// taken a UDP socket into its connection pool. With Options.Tap set, the
// sockets (and accepted TCP connections) are wrapped so that every message
// they carry goes through the trace tap (gateway/trace).
//
// It does not serve the sockets (the gateway's Server hands them to sipgo)
// and does not choose which of them faces a peer (gateway/facing).
package listen
