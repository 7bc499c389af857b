package listen

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/outpost/outpost/gateway/trace"
)

// Spec is one SIP listening socket as configured.
type Spec struct {
	Transport string // "udp", "tcp" or "tls"
	Addr      string // "127.0.0.1:5060"; port 0 = any free port
}

func (s Spec) String() string { return s.Transport + ":" + s.Addr }

// DefaultUDPReadBuffer is the receive buffer of a UDP socket when Options
// leaves it 0: a burst of re-registrations queues in the kernel instead of
// being dropped.
const DefaultUDPReadBuffer = 4 << 20

// Options tune the sockets Bind opens. Zero fields mean defaults.
type Options struct {
	// UDPReadBuffer is the receive buffer of each UDP socket; 0 =
	// DefaultUDPReadBuffer.
	UDPReadBuffer int
	// TCPIdle is how long a TCP connection may stay silent between
	// messages before it is closed; 0 = never.
	TCPIdle time.Duration
	// TCPMessageTimeout is how long a TCP connection may take to send a
	// complete SIP message: the first one from the accept, each later one
	// from its first byte; past it the connection is closed. 0 =
	// DefaultTCPMessageTimeout (10 s).
	TCPMessageTimeout time.Duration
	// Tap, when set, sees every message the sockets read and write
	// (trace.WrapPacketConn, trace.WrapConn); off costs an atomic load.
	Tap *trace.Tap
	// TLS is the server configuration of tls sockets (the box's
	// certificate, TLS 1.2 or later: see ServerTLS); required to bind one.
	TLS *tls.Config
	// Sojourn, when set, is called by each UDP socket's reader (Linux)
	// with how long the oldest datagram waiting in the socket had waited,
	// once per batch it reads (the overload gate's signal: a queue in the
	// kernel is invisible to anything after the read).
	Sojourn func(time.Duration)
}

// ServerTLS is the TLS configuration of tls listeners: TLS 1.2 or later,
// the certificate getCert returns for each handshake (so a new
// certificate applies to the next connection without rebinding).
func ServerTLS(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert}
}

// Socket is one bound listener: exactly one of PacketConn (udp) and
// Listener (tcp, tls) is set.
type Socket struct {
	Bound      string // the bound address, e.g. "udp:127.0.0.1:40211"
	PacketConn net.PacketConn
	Listener   net.Listener
	// TLS: Listener hands out TLS server connections (plain text to the
	// reader: the limits, the message deadline and the trace tap see SIP,
	// not ciphertext); serve it with sipgo's ServeTLS.
	TLS bool
}

// Close closes the socket.
func (s *Socket) Close() error {
	if s.PacketConn != nil {
		return s.PacketConn.Close()
	}
	return s.Listener.Close()
}

// Bind opens the socket sp describes.
func Bind(sp Spec, o Options) (*Socket, error) {
	lc := net.ListenConfig{}
	switch sp.Transport {
	case "udp":
		pc, err := lc.ListenPacket(context.Background(), "udp", sp.Addr)
		if err != nil {
			return nil, fmt.Errorf("gateway: listen %s: %w", sp, err)
		}
		rbuf := o.UDPReadBuffer
		if rbuf == 0 {
			rbuf = DefaultUDPReadBuffer
		}
		setReadBuffer(pc, rbuf)
		pc = rawUDPConn(pc, o.Sojourn)
		bound := "udp:" + pc.LocalAddr().String()
		if o.Tap != nil {
			pc = trace.WrapPacketConn(pc, o.Tap)
		}
		return &Socket{PacketConn: pc, Bound: bound}, nil
	case "tcp":
		ln, err := lc.Listen(context.Background(), "tcp", sp.Addr)
		if err != nil {
			return nil, fmt.Errorf("gateway: listen %s: %w", sp, err)
		}
		return &Socket{Listener: newLimitedListener(ln, o.TCPIdle, o.TCPMessageTimeout, o.Tap, nil), Bound: "tcp:" + ln.Addr().String()}, nil
	case "tls":
		if o.TLS == nil {
			return nil, fmt.Errorf("gateway: listen %s: no TLS certificate", sp)
		}
		ln, err := lc.Listen(context.Background(), "tcp", sp.Addr)
		if err != nil {
			return nil, fmt.Errorf("gateway: listen %s: %w", sp, err)
		}
		return &Socket{Listener: newLimitedListener(ln, o.TCPIdle, o.TCPMessageTimeout, o.Tap, o.TLS), Bound: "tls:" + ln.Addr().String(), TLS: true}, nil
	default:
		return nil, fmt.Errorf("gateway: listen %s: unsupported transport %q", sp, sp.Transport)
	}
}

// Set is the bound sockets, keyed by the configured spec.
type Set map[Spec]*Socket

// BindAll returns a socket for every spec: keep's socket for a spec in
// keep, a new one otherwise. On any failure it closes what it bound (never
// a socket of keep) and returns the error naming the spec.
func BindAll(specs []Spec, o Options, keep Set) (Set, error) {
	out := Set{}
	for _, sp := range specs {
		if l, ok := keep[sp]; ok {
			out[sp] = l
			continue
		}
		l, err := Bind(sp, o)
		if err != nil {
			out.CloseNew(keep)
			return nil, err
		}
		out[sp] = l
	}
	return out, nil
}

// CloseNew closes the sockets of s that are not in old (a reconciliation
// that is abandoned, or an old set's sockets that a new one dropped).
func (s Set) CloseNew(old Set) {
	for k, l := range s {
		if old[k] == nil {
			l.Close()
		}
	}
}

// CloseAll closes every socket of s.
func (s Set) CloseAll() {
	for _, l := range s {
		l.Close()
	}
}

// UDP returns the UDP sockets of s, sorted by local address as text (so
// "the first" is the same on every call).
func (s Set) UDP() []net.PacketConn {
	var out []net.PacketConn
	for _, l := range s {
		if l.PacketConn != nil {
			out = append(out, l.PacketConn)
		}
	}
	slices.SortFunc(out, func(x, y net.PacketConn) int {
		return strings.Compare(x.LocalAddr().String(), y.LocalAddr().String())
	})
	return out
}

// UDPAddrs returns the local addresses of the UDP sockets of s, in the
// order of UDP, with IPv4-mapped addresses unmapped.
func (s Set) UDPAddrs() []netip.AddrPort {
	pcs := s.UDP()
	out := make([]netip.AddrPort, 0, len(pcs))
	for _, pc := range pcs {
		out = append(out, addrPort(pc))
	}
	return out
}

func addrPort(pc net.PacketConn) netip.AddrPort {
	if a, ok := pc.LocalAddr().(*net.UDPAddr); ok {
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// StreamAddrs returns the local addresses of the TCP (tls false) or TLS
// listeners of s, sorted, with IPv4-mapped addresses unmapped: what a
// Contact names for a peer that must reach the box over that transport.
func (s Set) StreamAddrs(tls bool) []netip.AddrPort {
	var out []netip.AddrPort
	for _, l := range s {
		if l.Listener == nil || l.TLS != tls {
			continue
		}
		if a, ok := l.Listener.Addr().(*net.TCPAddr); ok {
			ap := a.AddrPort()
			out = append(out, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}
