package sdprewrite

import (
	"strconv"
	"strings"
)

// Codec is one payload format of an m= line with its a=rtpmap and a=fmtp.
type Codec struct {
	PT       uint8
	Name     string // encoding name as written, e.g. "PCMU", "telephone-event"
	Rate     int    // clock rate in Hz
	Channels int    // 0 when the rtpmap gives none
	Fmtp     string // format parameters after "a=fmtp:PT ", "" when none
}

// Is reports whether c has the encoding name (case-insensitive, RFC 4855 §3).
func (c Codec) Is(name string) bool { return strings.EqualFold(c.Name, name) }

// rtpmap returns the a=rtpmap value without the "a=rtpmap:" prefix.
func (c Codec) rtpmap() string {
	s := strconv.Itoa(int(c.PT)) + " " + c.Name + "/" + strconv.Itoa(c.Rate)
	if c.Channels > 0 {
		s += "/" + strconv.Itoa(c.Channels)
	}
	return s
}

// staticCodecs are the RTP/AVP static audio payload types of RFC 3551 §6
// that a phone may list without an a=rtpmap.
var staticCodecs = map[uint8]Codec{
	0:  {PT: 0, Name: "PCMU", Rate: 8000},
	3:  {PT: 3, Name: "GSM", Rate: 8000},
	4:  {PT: 4, Name: "G723", Rate: 8000},
	8:  {PT: 8, Name: "PCMA", Rate: 8000},
	9:  {PT: 9, Name: "G722", Rate: 8000},
	13: {PT: 13, Name: "CN", Rate: 8000},
	18: {PT: 18, Name: "G729", Rate: 8000},
}

// StaticCodec returns the codec of a static payload type (RFC 3551 §6).
func StaticCodec(pt uint8) (Codec, bool) {
	c, ok := staticCodecs[pt]
	return c, ok
}

// Find returns the first codec of list with the encoding name.
func Find(list []Codec, name string) (Codec, bool) {
	for _, c := range list {
		if c.Is(name) {
			return c, true
		}
	}
	return Codec{}, false
}

// Intersect returns the codecs of offered whose names appear in allowed,
// ordered by allowed (the preference order) and, for equal names, as
// offered. offered is not modified.
func Intersect(offered []Codec, allowed []string) []Codec {
	var out []Codec
	for _, name := range allowed {
		for _, c := range offered {
			if c.Is(name) {
				out = append(out, c)
			}
		}
	}
	return out
}
