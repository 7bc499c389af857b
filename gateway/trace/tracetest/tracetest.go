// Package tracetest reads back what gateway/trace writes, independently of
// it, for tests: pcap files (Ethernet, IPv4/IPv6, UDP/TCP) and HEPv3
// packets, and runs a HEP capture server on loopback.
package tracetest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Packet is one pcap record, decoded.
type Packet struct {
	Time     time.Time
	Proto    string // "udp" or "tcp"
	Src, Dst netip.AddrPort
	Seq      uint32 // TCP only
	Payload  []byte
}

// ReadPcap decodes a classic little-endian, microsecond pcap file of link
// type Ethernet.
func ReadPcap(r io.Reader) ([]Packet, error) {
	h := make([]byte, 24)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, fmt.Errorf("pcap header: %w", err)
	}
	if binary.LittleEndian.Uint32(h) != 0xa1b2c3d4 {
		return nil, fmt.Errorf("pcap magic %x", h[:4])
	}
	if lt := binary.LittleEndian.Uint32(h[20:]); lt != 1 {
		return nil, fmt.Errorf("link type %d, want 1 (Ethernet)", lt)
	}
	var out []Packet
	for {
		rh := make([]byte, 16)
		if _, err := io.ReadFull(r, rh); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("record header: %w", err)
		}
		n := binary.LittleEndian.Uint32(rh[8:])
		data := make([]byte, n)
		if _, err := io.ReadFull(r, data); err != nil {
			return out, fmt.Errorf("record: %w", err)
		}
		p, err := decodeFrame(data)
		if err != nil {
			return out, err
		}
		p.Time = time.Unix(int64(binary.LittleEndian.Uint32(rh)), int64(binary.LittleEndian.Uint32(rh[4:]))*1000)
		out = append(out, p)
	}
}

func decodeFrame(f []byte) (Packet, error) {
	var p Packet
	if len(f) < 14 {
		return p, errors.New("short frame")
	}
	et := binary.BigEndian.Uint16(f[12:])
	ip := f[14:]
	var proto byte
	var l4 []byte
	var src, dst netip.Addr
	switch et {
	case 0x0800:
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return p, errors.New("bad IPv4 header")
		}
		hl := int(ip[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if total > len(ip) {
			return p, errors.New("IPv4 length beyond the frame")
		}
		proto = ip[9]
		src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		l4 = ip[hl:total]
	case 0x86dd:
		if len(ip) < 40 || ip[0]>>4 != 6 {
			return p, errors.New("bad IPv6 header")
		}
		pl := int(binary.BigEndian.Uint16(ip[4:]))
		proto = ip[6]
		src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		l4 = ip[40 : 40+pl]
	default:
		return p, fmt.Errorf("ethertype %#x", et)
	}
	switch proto {
	case 17:
		if len(l4) < 8 || int(binary.BigEndian.Uint16(l4[4:])) != len(l4) {
			return p, errors.New("bad UDP header")
		}
		p.Proto, p.Payload = "udp", l4[8:]
	case 6:
		if len(l4) < 20 {
			return p, errors.New("bad TCP header")
		}
		p.Proto, p.Seq, p.Payload = "tcp", binary.BigEndian.Uint32(l4[4:]), l4[int(l4[12]>>4)*4:]
	default:
		return p, fmt.Errorf("IP protocol %d", proto)
	}
	p.Src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(l4[0:]))
	p.Dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(l4[2:]))
	return p, nil
}

// HEP is one decoded HEPv3 packet: its chunks by type (vendor 0).
type HEP map[uint16][]byte

// DecodeHEP decodes one HEPv3 packet.
func DecodeHEP(b []byte) (HEP, error) {
	if len(b) < 6 || string(b[:4]) != "HEP3" {
		return nil, errors.New("not HEP3")
	}
	if n := int(binary.BigEndian.Uint16(b[4:])); n != len(b) {
		return nil, fmt.Errorf("HEP length %d, packet %d", n, len(b))
	}
	h := HEP{}
	for rest := b[6:]; len(rest) > 0; {
		if len(rest) < 6 {
			return nil, errors.New("short chunk header")
		}
		vendor, typ, n := binary.BigEndian.Uint16(rest), binary.BigEndian.Uint16(rest[2:]), int(binary.BigEndian.Uint16(rest[4:]))
		if n < 6 || n > len(rest) {
			return nil, fmt.Errorf("chunk %#x: length %d", typ, n)
		}
		if vendor == 0 {
			h[typ] = rest[6:n]
		}
		rest = rest[n:]
	}
	return h, nil
}

// Uint reads a chunk of 1, 2 or 4 bytes as a number.
func (h HEP) Uint(typ uint16) uint32 {
	var v uint32
	for _, c := range h[typ] {
		v = v<<8 | uint32(c)
	}
	return v
}

// Addrs are the source and destination of the packet.
func (h HEP) Addrs() (src, dst netip.AddrPort) {
	s, d := h[0x0003], h[0x0004]
	if h.Uint(0x0001) == 10 {
		s, d = h[0x0005], h[0x0006]
	}
	sa, _ := netip.AddrFromSlice(s)
	da, _ := netip.AddrFromSlice(d)
	return netip.AddrPortFrom(sa, uint16(h.Uint(0x0007))), netip.AddrPortFrom(da, uint16(h.Uint(0x0008)))
}

// HEPServer is a capture server on loopback: UDP and TCP on the same port
// number when it can get one (else each its own).
type HEPServer struct {
	UDP net.PacketConn
	TCP net.Listener
	C   chan HEP // decoded packets, in arrival order per transport

	mu   sync.Mutex
	errs []error
	wg   sync.WaitGroup
}

// NewHEPServer listens on 127.0.0.1; Close stops it.
func NewHEPServer() (*HEPServer, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pc.Close()
		return nil, err
	}
	s := &HEPServer{UDP: pc, TCP: ln, C: make(chan HEP, 1024)}
	s.wg.Go(func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.deliver(append([]byte(nil), buf[:n]...))
		}
	})
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					h := make([]byte, 6)
					if _, err := io.ReadFull(r, h); err != nil {
						return
					}
					b := make([]byte, binary.BigEndian.Uint16(h[4:]))
					copy(b, h)
					if _, err := io.ReadFull(r, b[6:]); err != nil {
						return
					}
					s.deliver(b)
				}
			})
		}
	})
	return s, nil
}

func (s *HEPServer) deliver(b []byte) {
	h, err := DecodeHEP(b)
	if err != nil {
		s.mu.Lock()
		s.errs = append(s.errs, err)
		s.mu.Unlock()
		return
	}
	select {
	case s.C <- h:
	default:
	}
}

// Errors are the packets that did not decode.
func (s *HEPServer) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// Close stops the server; TCP connections end when their peer closes them.
func (s *HEPServer) Close() {
	s.UDP.Close()
	s.TCP.Close()
}
