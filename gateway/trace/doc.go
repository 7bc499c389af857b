// Package trace shows the SIP messages the box sends and receives, as they
// crossed its listening sockets: a Tap that the sockets' wrappers
// (WrapPacketConn, WrapConn; gateway/listen applies them) hand every
// datagram and every TCP message to, and the Tap's consumers — live
// subscribers (the API's trace stream, outpostctl trace) and the HEPv3
// exporter to a Homer capture server. It also writes messages as a pcap
// file with synthetic Ethernet, IP and UDP/TCP headers (Wireshark, sngrep).
//
// Tracing is off until a consumer attaches: a socket's read or write then
// costs one atomic load more (see the benchmark in bench_test.go). When on,
// each message is copied once and offered to every consumer's bounded
// queue; a full queue drops the message and counts it, so a slow consumer
// never holds up the SIP path.
//
// What is traced is what crosses the gateway's listening sockets: every UDP
// datagram (the box sends from its listeners) and every message on a TCP
// connection a listener accepted. TCP connections sipgo dials itself (a B
// leg or probe to a TCP target) have no hook in sipgo v1.7.3 and are not
// traced. It parses no SIP beyond the few headers a filter and the HEP
// correlation id need, and imports no SIP stack, so outpostctl can use it
// to write pcap files.
package trace
