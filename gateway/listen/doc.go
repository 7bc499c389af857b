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
// On Linux a UDP socket reads and writes with raw recvfrom/sendto system
// calls on its non-blocking descriptor, waiting for readiness through the
// runtime's poller like net (rawudp_linux.go): net's calls mark the P as
// in a system call, and under a CPU quota the runtime's monitor then keeps
// taking Ps from quota-frozen threads and polling every 20 µs, a third of
// the CPU at a 0.2-CPU cap (bench/RESULTS.md, issue 16 item 2). Addresses
// other than *net.UDPAddr, and zoned IPv6 destinations, go through net.
//
// It does not serve the sockets (the gateway's Server hands them to sipgo)
// and does not choose which of them faces a peer (gateway/facing).
package listen
