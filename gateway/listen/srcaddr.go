package listen

import "net"

// SourceAddr is the source of a datagram read from a UDP listener: the
// address and its text, computed once per source and kept (srcCache).
//
// Why: sipgo takes the text of every datagram's source (net.Addr.String,
// for its connection pool and the message's source), and a *net.UDPAddr
// builds it anew each time: with the address itself, five allocations a
// datagram, thirty a call through the B2BUA (BenchmarkCall), for the same
// few peers (the trunk, HQ, the phones). Read-only: it is handed to every
// reader of a datagram from that source.
type SourceAddr struct {
	net.UDPAddr
	text string
}

// String returns the address as "host:port" ("[host%zone]:port" for IPv6).
func (a *SourceAddr) String() string { return a.text }

// UDPAddrOf returns the *net.UDPAddr a net.Addr from a UDP listener
// stands for: a plain one, or a SourceAddr's; nil for anything else.
func UDPAddrOf(a net.Addr) *net.UDPAddr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a
	case *SourceAddr:
		return &a.UDPAddr
	}
	return nil
}
