package trace

import (
	"encoding/binary"
	"io"
	"net/netip"
)

// Pcap file layout (the classic libpcap format, microsecond timestamps):
// link type Ethernet (1), so IPv4 and IPv6 messages share one file, with
// synthetic MAC addresses, and IPv4/IPv6 and UDP or TCP headers built from
// the message's addresses. TCP messages are written as TCP segments (PSH,
// ACK) with made-up sequence numbers that count the bytes of each
// direction of a connection from 1, and no handshake: Wireshark and sngrep
// reassemble and dissect them as SIP over TCP. A message larger than one
// IP packet can hold is split into several segments.
const (
	pcapMagic     = 0xa1b2c3d4
	linkEthernet  = 1
	pcapSnapLen   = 262144
	maxSegPayload = 65000 // fits an IPv4 packet's 16-bit length with headers
)

// PcapWriter writes messages to a pcap file. Each record is written with
// one Write call, so a file cut off by a killed process ends at a record.
type PcapWriter struct {
	w   io.Writer
	seq map[flow]uint32 // the next TCP sequence number of each direction
	buf []byte
}

type flow struct{ src, dst netip.AddrPort }

// NewPcapWriter writes the file header to w.
func NewPcapWriter(w io.Writer) (*PcapWriter, error) {
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h[0:], pcapMagic)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], pcapSnapLen)
	binary.LittleEndian.PutUint32(h[20:], linkEthernet)
	if _, err := w.Write(h); err != nil {
		return nil, err
	}
	return &PcapWriter{w: w, seq: map[flow]uint32{}}, nil
}

// Write writes m as one record (several for a TCP message too large for
// one segment).
func (p *PcapWriter) Write(m *Message) error {
	src, dst := m.Src(), m.Dst()
	data := m.Data
	for first := true; first || len(data) > 0; first = false {
		chunk := data[:min(len(data), maxSegPayload)]
		data = data[len(chunk):]
		if err := p.record(m, src, dst, chunk); err != nil {
			return err
		}
	}
	return nil
}

func (p *PcapWriter) record(m *Message, src, dst netip.AddrPort, payload []byte) error {
	tcp := m.Transport == "tcp"
	l4 := udpHeader(src, dst, payload)
	proto := byte(17)
	if tcp {
		proto = 6
		f := flow{src, dst}
		seq := p.seq[f]
		if seq == 0 {
			seq = 1
		}
		ack := p.seq[flow{dst, src}]
		if ack == 0 {
			ack = 1
		}
		p.seq[f] = seq + uint32(len(payload))
		l4 = tcpHeader(src, dst, seq, ack, payload)
	}
	p.buf = p.buf[:0]
	p.buf = append(p.buf, make([]byte, 16)...) // record header, filled below
	// Ethernet: synthetic locally administered MACs, 02:00:00:00:00:01 → …02
	p.buf = append(p.buf, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1)
	if src.Addr().Is4() {
		p.buf = append(p.buf, 0x08, 0x00)
		p.buf = appendIPv4(p.buf, src.Addr(), dst.Addr(), proto, len(l4)+len(payload))
	} else {
		p.buf = append(p.buf, 0x86, 0xdd)
		p.buf = appendIPv6(p.buf, src.Addr(), dst.Addr(), proto, len(l4)+len(payload))
	}
	p.buf = append(p.buf, l4...)
	p.buf = append(p.buf, payload...)
	n := len(p.buf) - 16
	t := m.Time
	binary.LittleEndian.PutUint32(p.buf[0:], uint32(t.Unix()))
	binary.LittleEndian.PutUint32(p.buf[4:], uint32(t.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(p.buf[8:], uint32(n))
	binary.LittleEndian.PutUint32(p.buf[12:], uint32(n))
	_, err := p.w.Write(p.buf)
	return err
}

func appendIPv4(b []byte, src, dst netip.Addr, proto byte, l4len int) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+l4len))
	h[6] = 0x40 // don't fragment
	h[8] = 64   // TTL
	h[9] = proto
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], ^checksum(0, h))
	return append(b, h...)
}

func appendIPv6(b []byte, src, dst netip.Addr, proto byte, l4len int) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(l4len))
	h[6] = proto
	h[7] = 64 // hop limit
	s, d := src.As16(), dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return append(b, h...)
}

func udpHeader(src, dst netip.AddrPort, payload []byte) []byte {
	h := make([]byte, 8)
	binary.BigEndian.PutUint16(h[0:], src.Port())
	binary.BigEndian.PutUint16(h[2:], dst.Port())
	binary.BigEndian.PutUint16(h[4:], uint16(8+len(payload)))
	sum := l4Checksum(src.Addr(), dst.Addr(), 17, h, payload)
	if sum == 0 {
		sum = 0xffff // RFC 768: a computed 0 is sent as all ones
	}
	binary.BigEndian.PutUint16(h[6:], sum)
	return h
}

func tcpHeader(src, dst netip.AddrPort, seq, ack uint32, payload []byte) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:], src.Port())
	binary.BigEndian.PutUint16(h[2:], dst.Port())
	binary.BigEndian.PutUint32(h[4:], seq)
	binary.BigEndian.PutUint32(h[8:], ack)
	h[12] = 5 << 4            // data offset: 5 words
	h[13] = 0x18              // PSH, ACK
	h[14], h[15] = 0xff, 0xff // window
	binary.BigEndian.PutUint16(h[16:], l4Checksum(src.Addr(), dst.Addr(), 6, h, payload))
	return h
}

// l4Checksum is the UDP/TCP checksum over the pseudo-header (RFC 768,
// RFC 793, RFC 8200 §8.1), the header (its checksum field zero) and payload.
func l4Checksum(src, dst netip.Addr, proto byte, h, payload []byte) uint16 {
	var ph []byte
	n := len(h) + len(payload)
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		ph = append(append(ph, s[:]...), d[:]...)
		ph = append(ph, 0, proto, byte(n>>8), byte(n))
	} else {
		s, d := src.As16(), dst.As16()
		ph = append(append(ph, s[:]...), d[:]...)
		ph = append(ph, byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0, 0, proto)
	}
	sum := checksum(0, ph)
	sum = checksum(uint32(sum), h)
	return ^checksum(uint32(sum), payload)
}

// checksum adds b to the one's complement sum (RFC 1071), folded.
func checksum(sum uint32, b []byte) uint16 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
