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
	// Streams are the other m= sections the box relays, by index in
	// Sections; a section without an entry (or with port 0) is rejected.
	Streams map[int]Stream
}

// Stream is what Rewrite writes into a relayed m= section other than the
// audio one. Its formats pass as the sender wrote them: the box relays
// the stream without changing its payload.
type Stream struct {
	Port      int       // the box's RTP port
	Proto     string    // the transport; "" keeps the sender's
	Direction Direction // written at media level
	Crypto    []Crypto  // the box's a=crypto lines (the sender's are removed)
}

// dropped reports whether an attribute of the audio section (or, with
// session true, of the session level) is regenerated or removed.
func dropped(name string, session bool) bool {
	switch name {
	case "rtpmap", "fmtp", "rtcp-fb":
		return !session
	}
	return droppedPassed(name, session)
}

// droppedPassed reports whether an attribute of a relayed section whose
// formats pass unchanged (or of the session level) is regenerated or
// removed: what describes the sender's transport and keys.
func droppedPassed(name string, session bool) bool {
	if _, ok := parseDirection(name); ok {
		return true
	}
	if strings.HasPrefix(name, "ice-") {
		return true
	}
	switch name {
	case "candidate", "end-of-candidates", "remote-candidates", "rtcp-mux", "rtcp-rsize":
		return true
	case "rtcp", "ssrc", "ssrc-group", "msid", "crypto":
		return !session
	case "group":
		return session // BUNDLE groups the box does not bundle (RFC 8843 §7.3.3: declined)
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
// ports, codecs and directions (see the package doc for which lines
// change). It needs an audio stream: without one (ParseAny, HasAudio
// false) it returns nil.
func (s *SDP) Rewrite(p Params) []byte {
	if !s.HasAudio() {
		return nil
	}
	var b strings.Builder
	line := func(l string) {
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	sessEnd := len(s.lines)
	if len(s.Sections) > 0 {
		sessEnd = s.Sections[0].start
	}
	haveSessC := false
	for _, l := range s.lines[:sessEnd] {
		haveSessC = haveSessC || strings.HasPrefix(l, "c=")
	}
	addr := p.Addr.Unmap()
	for _, l := range s.lines[:sessEnd] {
		if len(l) >= 2 && l[1] == '=' {
			switch l[0] {
			case 'o':
				o := p.Origin
				if o.Username == "" {
					o.Username = "-"
				}
				line("o=" + o.Username + " " + o.SessID + " " + strconv.FormatUint(o.Version, 10) +
					" IN " + addrType(addr) + " " + addr.String())
				continue
			case 'c':
				line(connLine(addr))
				continue
			case 'a':
				if name, _, _ := strings.Cut(l[2:], ":"); dropped(name, true) {
					continue
				}
			}
		}
		line(l)
	}
	for i, sec := range s.Sections {
		body := s.lines[sec.start+1 : sec.end]
		st, relayed := p.Streams[i]
		switch {
		case i == s.AudioIndex:
			line(s.audioMLine(p))
			s.writeBody(line, body, addr, haveSessC, func(name string) bool { return dropped(name, false) })
			s.writeAudioTail(line, p)
		case relayed && st.Port != 0 && sec.Relayable():
			line(streamMLine(s.lines[sec.start], st))
			s.writeBody(line, body, addr, haveSessC, func(name string) bool { return droppedPassed(name, false) })
			for _, c := range st.Crypto {
				line("a=crypto:" + c.Line())
			}
			if sec.RTCPPort != 0 {
				line("a=rtcp:" + strconv.Itoa(st.Port+1) + " IN " + addrType(addr) + " " + addr.String())
			}
			line("a=" + st.Direction.String())
		default:
			// Rejected or disabled (RFC 3264 §6, §8.2: port 0), its
			// lines kept.
			f := strings.Fields(s.lines[sec.start][2:])
			if len(f) >= 2 {
				f[1] = "0"
			}
			line("m=" + strings.Join(f, " "))
			s.writeBody(line, body, addr, true, func(string) bool { return false })
		}
	}
	return []byte(b.String())
}

// writeBody writes the lines of a section after its m= line: c= lines
// carry the box's address (one is written first when the session level
// has none), and the attributes drop tells are left out.
func (s *SDP) writeBody(line func(string), body []string, addr netip.Addr, haveSessC bool, drop func(string) bool) {
	if !haveSessC {
		line(connLine(addr))
	}
	for _, l := range body {
		if len(l) >= 2 && l[1] == '=' {
			switch l[0] {
			case 'c':
				if haveSessC {
					line(connLine(addr))
				}
				continue
			case 'a':
				if name, _, _ := strings.Cut(l[2:], ":"); drop(name) {
					continue
				}
			}
		}
		line(l)
	}
}

// streamMLine is a relayed section's m= line with the box's port and
// transport; the formats stay as the sender wrote them.
func streamMLine(m string, st Stream) string {
	f := strings.Fields(m[2:])
	f[1] = strconv.Itoa(st.Port)
	if st.Proto != "" {
		f[2] = st.Proto
	}
	return "m=" + strings.Join(f, " ")
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
