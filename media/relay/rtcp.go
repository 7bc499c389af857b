package relay

import (
	"encoding/binary"

	"github.com/pion/rtcp"
)

// RTCP is read with github.com/pion/rtcp into a header and two reports
// that the leg's RTCP reader owns and reuses (forwarder.rtcpHdr, sr, rr),
// so that reading allocates nothing per packet once the reports' slices
// have grown to the largest report count seen.

// Offsets in an SR or RR (RFC 3550 §6.4.1, §6.4.2) of the two fields the
// relay rewrites.
const (
	rtcpSenderSSRCOffset = 4  // SR and RR: SSRC of the sender, after the 4-byte header
	srRTPTimeOffset      = 16 // SR: RTP timestamp, after the SSRC and the 64-bit NTP timestamp
)

// rtcpValid reports whether p starts with an RTCP header of version 2
// (pion/rtcp) and is long enough for the sender's SSRC that every RTCP
// packet carries (RFC 3550 §6.4–6.6). Anything after the first packet of
// a compound is relayed as it came.
func (f *forwarder) rtcpValid(p []byte) bool {
	return f.rtcpHdr.Unmarshal(p) == nil && len(p) >= rtcpSenderSSRCOffset+4
}

// followRewrite makes the RTCP of compound packet p (RFC 3550 §6.1) match
// the rewritten RTP stream of m: in each sender report (SR) and receiver
// report (RR) from m.in the sender SSRC becomes m.out and an SR's RTP
// timestamp is offset like the stream's. The packets are read with
// pion/rtcp; the two fields are written in place at their RFC offsets
// because pion/rtcp v1.2 has no MarshalTo (Marshal builds a new slice per
// packet) and nothing else in the packet changes. A sub-packet that does
// not parse ends the walk; what was not rewritten is relayed unchanged.
func (f *forwarder) followRewrite(p []byte, m *ssrcMap) {
	for len(p) > 0 {
		if f.rtcpHdr.Unmarshal(p) != nil {
			return
		}
		n := (int(f.rtcpHdr.Length) + 1) * 4 // length in 32-bit words minus one
		if n > len(p) {
			return
		}
		sub := p[:n]
		switch f.rtcpHdr.Type {
		case rtcp.TypeSenderReport:
			f.sr.Reports, f.sr.ProfileExtensions = f.sr.Reports[:0], nil
			if f.sr.Unmarshal(sub) == nil && f.sr.SSRC == m.in {
				binary.BigEndian.PutUint32(sub[rtcpSenderSSRCOffset:], m.out)
				binary.BigEndian.PutUint32(sub[srRTPTimeOffset:], f.sr.RTPTime+m.tsOff)
			}
		case rtcp.TypeReceiverReport:
			f.rr.Reports, f.rr.ProfileExtensions = f.rr.Reports[:0], nil
			if f.rr.Unmarshal(sub) == nil && f.rr.SSRC == m.in {
				binary.BigEndian.PutUint32(sub[rtcpSenderSSRCOffset:], m.out)
			}
		}
		p = p[n:]
	}
}
