package sdprewrite

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Params is what Rewrite writes into the SDP.
type Params struct {
	Origin    Origin     // the o= line (RFC 3264 §8: same id, version +1 per change)
	Addr      netip.Addr // the box's address: every c=, and a=rtcp when written
	Port      int        // the box's RTP port for the audio m=; 0 rejects the stream
	Codecs    []Codec    // the audio formats, in order
	Direction Direction  // written at media level
	// Proto is the audio m= line's transport ("RTP/SAVP", "RTP/AVP");
	// "" keeps the sender's.
	Proto string
	// Crypto are the a=crypto lines written into the audio section (the
	// sender's are always removed: keys are per hop).
	Crypto []Crypto
}

// dropped reports whether an attribute of the audio section (or, with
// session true, of the session level) is regenerated or removed.
func dropped(name string, session bool) bool {
	if _, ok := parseDirection(name); ok {
		return true
	}
	if strings.HasPrefix(name, "ice-") {
		return true
	}
	switch name {
	case "candidate", "end-of-candidates", "remote-candidates", "rtcp-mux", "rtcp-rsize":
		return true
	case "rtpmap", "fmtp", "rtcp", "ssrc", "ssrc-group", "rtcp-fb", "msid", "crypto":
		return !session
	case "group":
		return session // BUNDLE groups mids the box does not bundle
	}
	return false
}

// addrType returns "IP4" or "IP6" for a c= or o= line.
func addrType(a netip.Addr) string {
	if a.Is4() || a.Is4In6() {
		return "IP4"
	}
	return "IP6"
}

func connLine(a netip.Addr) string {
	return "c=IN " + addrType(a) + " " + a.Unmap().String()
}

// Rewrite returns the SDP to send: s with the box's origin, address,
// port, codecs and direction (see the package doc for which lines change).
// It needs an audio stream: without one (ParseAny, HasAudio false) it
// returns nil.
func (s *SDP) Rewrite(p Params) []byte {
	if !s.HasAudio() {
		return nil
	}
	var b strings.Builder
	line := func(l string) {
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	haveSessC := false
	for _, l := range s.lines[:min(s.audioStart, len(s.lines))] {
		if strings.HasPrefix(l, "c=") {
			haveSessC = true
		}
		if strings.HasPrefix(l, "m=") {
			break
		}
	}
	addr := p.Addr.Unmap()
	section := -1
	for i, l := range s.lines {
		if i == s.audioEnd && s.audioEnd > s.audioStart {
			s.writeAudioTail(line, p)
		}
		if len(l) < 2 || l[1] != '=' {
			line(l)
			continue
		}
		inAudio := i >= s.audioStart && i < s.audioEnd
		switch l[0] {
		case 'o':
			if section == -1 {
				o := p.Origin
				if o.Username == "" {
					o.Username = "-"
				}
				line("o=" + o.Username + " " + o.SessID + " " + strconv.FormatUint(o.Version, 10) +
					" IN " + addrType(addr) + " " + addr.String())
				continue
			}
		case 'm':
			section++
			if i == s.audioStart {
				line(s.audioMLine(p))
				if !haveSessC {
					line(connLine(addr))
				}
				continue
			}
			// Every other stream is disabled (RFC 3264 §8.2: port 0).
			f := strings.Fields(l[2:])
			if len(f) >= 2 {
				f[1] = "0"
			}
			line("m=" + strings.Join(f, " "))
			continue
		case 'c':
			if section != -1 && i >= s.audioStart && i < s.audioEnd && !haveSessC {
				continue // written after the m= line already
			}
			line(connLine(addr))
			continue
		case 'a':
			name, _, _ := strings.Cut(l[2:], ":")
			if section == -1 && dropped(name, true) {
				continue
			}
			if inAudio && dropped(name, false) {
				continue
			}
		}
		line(l)
	}
	if s.audioEnd == len(s.lines) {
		s.writeAudioTail(line, p)
	}
	return []byte(b.String())
}

func (s *SDP) audioMLine(p Params) string {
	var b strings.Builder
	b.WriteString("m=audio ")
	b.WriteString(strconv.Itoa(p.Port))
	b.WriteByte(' ')
	proto := s.Audio.Proto
	if p.Proto != "" {
		proto = p.Proto
	}
	if proto == "" {
		proto = "RTP/AVP"
	}
	b.WriteString(proto)
	for _, c := range p.Codecs {
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(int(c.PT)))
	}
	if len(p.Codecs) == 0 {
		// RFC 4566 needs a format even on a rejected stream.
		for _, c := range s.Audio.Codecs[:min(1, len(s.Audio.Codecs))] {
			b.WriteString(" " + strconv.Itoa(int(c.PT)))
		}
		if len(s.Audio.Codecs) == 0 {
			b.WriteString(" 0")
		}
	}
	return b.String()
}

// writeAudioTail writes the regenerated attributes at the end of the
// audio section (RFC 4566 §5: a= lines come last in a media section).
func (s *SDP) writeAudioTail(line func(string), p Params) {
	for _, c := range p.Codecs {
		line("a=rtpmap:" + c.rtpmap())
		if c.Fmtp != "" {
			line("a=fmtp:" + strconv.Itoa(int(c.PT)) + " " + c.Fmtp)
		}
	}
	for _, c := range p.Crypto {
		line("a=crypto:" + c.Line())
	}
	if s.Audio.RTCPPort != 0 && p.Port != 0 {
		a := p.Addr.Unmap()
		line("a=rtcp:" + strconv.Itoa(p.Port+1) + " IN " + addrType(a) + " " + a.String())
	}
	line("a=" + p.Direction.String())
}

// WithOrigin returns the description with its session-level o= line
// written from o (a B2BUA keeping one origin per dialog, RFC 3264 §8)
// and every other line as the sender wrote it. A description that has no
// o= line, or whose origin already is o, comes back byte for byte;
// otherwise the lines are joined with CRLF and end with one.
func (s *SDP) WithOrigin(o Origin) []byte {
	if s.originAt < 0 || o == s.Origin {
		return []byte(s.raw)
	}
	lines := slices.Clone(s.lines)
	lines[s.originAt] = "o=" + o.value()
	return joinCRLF(lines)
}

// WithSendRecv returns the description with every direction attribute
// (session level and every media section) made a=sendrecv, and every
// other line as the sender wrote it: a description remembered from a
// held call becomes an offer that does not start on hold (RFC 3264 §8.4).
// No attribute is added, since sendrecv is the default (§5.1), and
// c=0.0.0.0 is left alone (only the sender knows its real address). A
// description without another direction comes back byte for byte;
// otherwise the lines are joined with CRLF and end with one.
func (s *SDP) WithSendRecv() []byte {
	var lines []string
	for i, l := range s.lines {
		if !strings.HasPrefix(l, "a=") {
			continue
		}
		name, _, _ := strings.Cut(l[2:], ":")
		if d, ok := parseDirection(name); !ok || d == SendRecv {
			continue
		}
		if lines == nil {
			lines = slices.Clone(s.lines)
		}
		lines[i] = "a=sendrecv"
	}
	if lines == nil {
		return []byte(s.raw)
	}
	return joinCRLF(lines)
}

func joinCRLF(lines []string) []byte {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}
