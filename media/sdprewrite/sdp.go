package sdprewrite

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// MaxSize is the largest SDP body Parse accepts.
const MaxSize = 64 << 10

// Errors of Parse.
var (
	ErrEmpty    = errors.New("media/sdprewrite: empty SDP")
	ErrTooLarge = errors.New("media/sdprewrite: SDP too large")
	ErrNoAudio  = errors.New("media/sdprewrite: no audio m= line")
)

// Direction is an RFC 3264 §5.1 / §6.1 media direction attribute.
type Direction uint8

// Directions; the zero value is SendRecv, the default of RFC 3264.
const (
	SendRecv Direction = iota
	SendOnly
	RecvOnly
	Inactive
)

var dirNames = [...]string{"sendrecv", "sendonly", "recvonly", "inactive"}

// String returns the attribute name.
func (d Direction) String() string {
	if int(d) < len(dirNames) {
		return dirNames[d]
	}
	return "sendrecv"
}

// Sends reports whether the SDP's author will send media.
func (d Direction) Sends() bool { return d == SendRecv || d == SendOnly }

// Receives reports whether the SDP's author wants to receive media.
func (d Direction) Receives() bool { return d == SendRecv || d == RecvOnly }

// Reverse is the direction an answerer uses for an offer's direction
// (RFC 3264 §6.1): sendonly ↔ recvonly.
func (d Direction) Reverse() Direction {
	switch d {
	case SendOnly:
		return RecvOnly
	case RecvOnly:
		return SendOnly
	}
	return d
}

// Make returns the direction that sends and/or receives as told.
func Make(sends, receives bool) Direction {
	switch {
	case sends && receives:
		return SendRecv
	case sends:
		return SendOnly
	case receives:
		return RecvOnly
	}
	return Inactive
}

func parseDirection(s string) (Direction, bool) {
	for i, n := range dirNames {
		if s == n {
			return Direction(i), true
		}
	}
	return SendRecv, false
}

// Origin is the o= line (RFC 4566 §5.2): "o=<username> <sess-id>
// <sess-version> <nettype> <addrtype> <unicast-address>". Parse leaves it
// zero when the line is missing or malformed (not six fields, or a
// version that is not a 64-bit number).
type Origin struct {
	Username string
	SessID   string
	Version  uint64
	NetType  string     // "IN"
	AddrType string     // "IP4" or "IP6"
	Address  string     // the unicast address as written: an IP literal or a host name
	Addr     netip.Addr // Address when it is an IP literal, else invalid
}

// IsZero reports whether o is the zero Origin (no usable o= line).
func (o Origin) IsZero() bool { return o == Origin{} }

// SameSession reports whether o and p name the same session: RFC 4566
// §5.2 makes every field but the version the session's identifier, and
// RFC 3264 §8 keeps them and raises the version when a description in a
// dialog changes.
func (o Origin) SameSession(p Origin) bool {
	o.Version, p.Version = 0, 0
	return o == p
}

// value is the o= line without "o=".
func (o Origin) value() string {
	return o.Username + " " + o.SessID + " " + strconv.FormatUint(o.Version, 10) + " " +
		o.NetType + " " + o.AddrType + " " + o.Address
}

// Media is the audio section the relay works with.
type Media struct {
	Port      int        // RTP port; 0 = stream rejected or disabled
	Proto     string     // e.g. "RTP/AVP"
	Addr      netip.Addr // media-level c=, else session-level; invalid when none or not an IP
	Hold      bool       // c= is 0.0.0.0 or :: (RFC 2543 hold)
	RTCPPort  int        // from a=rtcp, 0 when absent (RTCP then uses Port+1)
	RTCPAddr  netip.Addr // from a=rtcp with an address, else invalid
	Codecs    []Codec    // in m= order
	Ptime     int        // a=ptime in ms, 0 when absent
	Direction Direction  // media level, else session level, else sendrecv
	// Crypto are the usable a=crypto attributes (RFC 4568) of the
	// section, in order; CryptoLines counts every a=crypto line, usable or
	// not (see ParseCrypto), so a caller can tell "no SDES offered" from
	// "none the box can key".
	Crypto      []Crypto
	CryptoLines int
}

// Section is one m= section of a description (RFC 4566 §5.14).
type Section struct {
	Kind  string // the m= media type: "audio", "video", "text", "application", ...
	Media        // transport, formats, address, direction and keys, read like the audio one's
	Mid   string // a=mid (RFC 5888), "" when none
	// Valid reports whether the m= line parsed (a kind, a port, a
	// transport); an invalid section is never relayed.
	Valid bool

	start, end int // its lines: [start, end)
}

// Relayable reports whether the box can anchor the section as an RTP
// stream passed through: an RTP audio, video or text stream (RFC 3551,
// RFC 4585, RFC 3711 profiles; RFC 4103 text) that was not rejected. DTLS
// (UDP/TLS/RTP/SAVPF), T.38 (udptl) and application streams are not.
func (sec Section) Relayable() bool {
	if !sec.Valid || sec.Port == 0 {
		return false
	}
	switch sec.Kind {
	case "audio", "video", "text":
	default:
		return false
	}
	switch strings.ToUpper(sec.Proto) {
	case "RTP/AVP", "RTP/AVPF", "RTP/SAVP", "RTP/SAVPF":
		return true
	}
	return false
}

// SDP is a parsed session description. It keeps its lines for Rewrite,
// WithOrigin and WithSendRecv.
type SDP struct {
	Origin Origin // session-level o=; zero when missing or malformed
	Audio  Media  // the first audio m= section; zero when HasAudio is false
	// Sections are the m= sections in order; AudioIndex is the one Audio
	// was read from, -1 when none.
	Sections   []Section
	AudioIndex int

	raw        string   // the description as received
	lines      []string // its non-blank lines, without terminators and trailing blanks
	originAt   int      // index of the session-level o= line, -1 when none
	audioStart int      // index of the audio m= line, -1 when none
	audioEnd   int      // index after the audio section's last line
	audioErr   error    // why the first audio m= line is unusable
}

// Parse reads b tolerantly. It fails only when b is empty, too large, or
// has no usable audio m= line.
func Parse(b []byte) (*SDP, error) {
	s, err := ParseAny(b)
	switch {
	case err != nil:
		return nil, err
	case s.audioErr != nil:
		return nil, s.audioErr
	case !s.HasAudio():
		return nil, ErrNoAudio
	}
	return s, nil
}

// HasAudio reports whether s has a usable audio m= section (always true
// after Parse).
func (s *SDP) HasAudio() bool { return s.audioStart >= 0 }

// ParseAny reads b like Parse but also accepts a description without a
// usable audio stream (video only, no m= line, a malformed audio m=
// line): HasAudio then reports false and Audio is zero. It fails only
// when b is empty or too large. It is for code that reads the session
// level (o=, directions) of whatever SDP it relays.
func ParseAny(b []byte) (*SDP, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, ErrEmpty
	}
	if len(b) > MaxSize {
		return nil, ErrTooLarge
	}
	s := &SDP{raw: string(b), originAt: -1, audioStart: -1, AudioIndex: -1}
	for _, l := range strings.Split(s.raw, "\n") {
		l = strings.TrimRight(l, "\r \t")
		if l == "" {
			continue
		}
		s.lines = append(s.lines, l)
	}
	var sess sectionReader
	var cur *sectionReader
	var readers []*sectionReader
	seenOrigin, seenAudio := false, false
	for i, l := range s.lines {
		if len(l) < 2 || l[1] != '=' {
			continue // not a type=value line: kept, ignored
		}
		v := l[2:]
		switch {
		case l[0] == 'm':
			if cur != nil {
				cur.sec.end = i
			}
			kind, _, _ := strings.Cut(v, " ")
			cur = &sectionReader{sec: Section{Kind: kind, start: i, end: len(s.lines)}}
			m, err := parseMLine(v)
			if err == nil {
				cur.sec.Media, cur.sec.Valid = m, true
			}
			if kind == "audio" && !seenAudio {
				seenAudio = true
				if err != nil {
					s.audioErr = fmt.Errorf("media/sdprewrite: line %d %q: %w", i+1, l, err)
				} else {
					s.AudioIndex = len(readers)
				}
			}
			readers = append(readers, cur)
		case cur == nil:
			// RFC 4566 §5: one o=, at session level; the first one counts.
			if l[0] == 'o' && !seenOrigin {
				s.Origin, s.originAt, seenOrigin = parseOrigin(v), i, true
			}
			sess.line(l[0], v)
		default:
			cur.line(l[0], v)
		}
	}
	for _, r := range readers {
		s.Sections = append(s.Sections, r.finish(&sess))
	}
	if s.AudioIndex >= 0 {
		a := s.Sections[s.AudioIndex]
		s.Audio, s.audioStart, s.audioEnd = a.Media, a.start, a.end
	}
	return s, nil
}

// sectionReader gathers the lines of one level (the session, or an m=
// section) that decide its Media.
type sectionReader struct {
	sec         Section
	addr        netip.Addr
	hold, haveC bool
	dir         Direction
	haveDir     bool
	rtpmaps     map[uint8]Codec
	fmtps       map[uint8]string
}

func (r *sectionReader) line(typ byte, v string) {
	m := &r.sec.Media
	switch typ {
	case 'c':
		r.addr, r.hold = parseConn(v)
		r.haveC = true
	case 'a':
		name, val, _ := strings.Cut(v, ":")
		if d, ok := parseDirection(name); ok {
			r.dir, r.haveDir = d, true
			return
		}
		switch name {
		case "rtpmap":
			if c, ok := parseRtpmap(val); ok {
				if r.rtpmaps == nil {
					r.rtpmaps = map[uint8]Codec{}
				}
				r.rtpmaps[c.PT] = c
			}
		case "fmtp":
			pt, rest, _ := strings.Cut(val, " ")
			if n, err := strconv.ParseUint(pt, 10, 7); err == nil {
				if r.fmtps == nil {
					r.fmtps = map[uint8]string{}
				}
				r.fmtps[uint8(n)] = strings.TrimSpace(rest)
			}
		case "ptime":
			if n, err := strconv.Atoi(strings.TrimSpace(val)); err == nil && n > 0 && n <= 1000 {
				m.Ptime = n
			}
		case "rtcp":
			m.RTCPPort, m.RTCPAddr = parseRTCP(val)
		case "crypto":
			m.CryptoLines++
			if c, err := ParseCrypto(val); err == nil && !hasTag(m.Crypto, c.Tag) {
				m.Crypto = append(m.Crypto, c)
			}
		case "mid":
			r.sec.Mid = strings.TrimSpace(val)
		}
	}
}

// finish settles the section's address and direction (its own, else the
// session's: RFC 4566 §5.7, RFC 3264 §5.1) and names its formats (RFC
// 4566 §6 rtpmap; RFC 3551 §6 for static types without one; unknown
// dynamic types keep an empty name, so they match no allowed codec).
func (r *sectionReader) finish(sess *sectionReader) Section {
	sec := r.sec
	sec.Addr, sec.Hold = r.addr, r.hold
	if !r.haveC {
		sec.Addr, sec.Hold = sess.addr, sess.hold
	}
	switch {
	case r.haveDir:
		sec.Direction = r.dir
	case sess.haveDir:
		sec.Direction = sess.dir
	}
	for i, c := range sec.Codecs {
		if m, ok := r.rtpmaps[c.PT]; ok {
			c = m
		} else if st, ok := StaticCodec(c.PT); ok {
			c = st
		}
		c.Fmtp = r.fmtps[c.PT]
		sec.Codecs[i] = c
	}
	return sec
}

// parseMLine reads "audio PORT[/N] PROTO FMT...".
func parseMLine(v string) (Media, error) {
	f := strings.Fields(v)
	if len(f) < 3 {
		return Media{}, errors.New("short m= line")
	}
	ps, _, _ := strings.Cut(f[1], "/")
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return Media{}, fmt.Errorf("bad port %q", f[1])
	}
	m := Media{Port: port, Proto: f[2]}
	for _, fm := range f[3:] {
		pt, err := strconv.ParseUint(fm, 10, 7)
		if err != nil {
			continue // not an RTP payload type: ignored
		}
		dup := false
		for _, c := range m.Codecs {
			dup = dup || c.PT == uint8(pt)
		}
		if !dup {
			m.Codecs = append(m.Codecs, Codec{PT: uint8(pt)})
		}
	}
	return m, nil
}

// parseConn reads "IN IP4 ADDR[/TTL[/N]]"; the address is invalid when it
// is a host name or malformed.
func parseConn(v string) (addr netip.Addr, hold bool) {
	f := strings.Fields(v)
	if len(f) < 3 || !strings.EqualFold(f[0], "IN") {
		return netip.Addr{}, false
	}
	a, _, _ := strings.Cut(f[2], "/")
	addr, err := netip.ParseAddr(a)
	if err != nil {
		return netip.Addr{}, false
	}
	addr = addr.Unmap().WithZone("")
	return addr, addr.IsUnspecified()
}

// parseOrigin reads "USER SESSID VERSION NETTYPE ADDRTYPE ADDRESS"; a line
// with another number of fields or a non-numeric version gives the zero
// Origin (code that continues an origin must not guess one).
func parseOrigin(v string) Origin {
	f := strings.Fields(v)
	if len(f) != 6 {
		return Origin{}
	}
	ver, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		return Origin{}
	}
	o := Origin{Username: f[0], SessID: f[1], Version: ver, NetType: f[3], AddrType: f[4], Address: f[5]}
	if a, err := netip.ParseAddr(f[5]); err == nil {
		o.Addr = a
	}
	return o
}

// parseRtpmap reads "PT NAME/RATE[/CHANNELS]".
func parseRtpmap(v string) (Codec, bool) {
	pt, enc, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok {
		return Codec{}, false
	}
	n, err := strconv.ParseUint(pt, 10, 7)
	if err != nil {
		return Codec{}, false
	}
	parts := strings.Split(strings.TrimSpace(enc), "/")
	c := Codec{PT: uint8(n), Name: parts[0]}
	if c.Name == "" || strings.ContainsAny(c.Name, " \t") {
		return Codec{}, false
	}
	if len(parts) > 1 {
		c.Rate, _ = strconv.Atoi(parts[1])
	}
	if len(parts) > 2 {
		c.Channels, _ = strconv.Atoi(parts[2])
	}
	if c.Rate <= 0 {
		c.Rate = 8000
	}
	return c, true
}

// parseRTCP reads "PORT [IN IP4 ADDR]" (RFC 3605).
func parseRTCP(v string) (int, netip.Addr) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, netip.Addr{}
	}
	port, err := strconv.Atoi(f[0])
	if err != nil || port <= 0 || port > 65535 {
		return 0, netip.Addr{}
	}
	var addr netip.Addr
	if len(f) >= 4 {
		addr, _ = netip.ParseAddr(f[3])
	}
	return port, addr
}

func hasTag(list []Crypto, tag int) bool {
	for _, c := range list {
		if c.Tag == tag {
			return true
		}
	}
	return false
}
