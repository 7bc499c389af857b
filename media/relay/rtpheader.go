package relay

import "github.com/pion/rtp"

// RTP headers are read and written with github.com/pion/rtp, into an
// rtp.Packet that each RTP reader goroutine owns and reuses, so that
// parsing allocates nothing per packet: Unmarshal points Payload (and the
// header extensions) into the read buffer and reuses the CSRC and
// extension slices, which grow once, on the first packet that has them.

// fixedHeaderLen is the size of the fixed RTP header (RFC 3550 §5.1).
const fixedHeaderLen = 12

// parseRTP parses RTP packet p into pkt: header, payload bounds (CSRCs,
// header extension and padding skipped). It reports false when p is not
// RTP version 2 or is truncated. Datagrams shorter than the fixed header
// are refused before pion sees them: pion's error for them is built with
// fmt.Errorf (an allocation), and they are the common junk.
func parseRTP(pkt *rtp.Packet, p []byte) bool {
	if len(p) < fixedHeaderLen || p[0]>>6 != 2 {
		return false
	}
	return pkt.Unmarshal(p) == nil
}

// writeRTPHeader writes h back into p, the packet it was parsed from, with
// pion's MarshalTo. Only the fixed header is marshalled (V, P, M, PT,
// sequence number, timestamp, SSRC): the relay never changes the CSRC
// list, the header extension or the padding, and re-encoding an RFC 8285
// extension block would normalise it (padding bytes moved, elements after
// ID 15 dropped), which can change its length under the payload. The
// first byte (P, X and CC as received) is kept as it was.
func writeRTPHeader(p []byte, h *rtp.Header) {
	first := p[0]
	fixed := rtp.Header{Version: h.Version, Marker: h.Marker, PayloadType: h.PayloadType,
		SequenceNumber: h.SequenceNumber, Timestamp: h.Timestamp, SSRC: h.SSRC}
	_, _ = fixed.MarshalTo(p[:fixedHeaderLen]) // cannot fail: 12 bytes hold a header without CSRCs or extension
	p[0] = first
}
