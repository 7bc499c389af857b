package relay

import (
	"bytes"

	"github.com/outpost/outpost/media/sdprewrite"
)

// write renders the SDP the box sends to leg to, with the o= version
// incremented only when the body changed since the last SDP sent on that
// leg (RFC 3264 §8). Called with s.mu held.
func (s *Session) write(to Leg, p *sdprewrite.SDP, port int, codecs []sdprewrite.Codec, dir sdprewrite.Direction, proto string, crypto []sdprewrite.Crypto, streams map[int]sdprewrite.Stream) []byte {
	st := &s.sent[to]
	params := sdprewrite.Params{
		Origin:    sdprewrite.Origin{Username: "outpost", SessID: st.sessID, Version: st.version},
		Addr:      s.local[to],
		Port:      port,
		Codecs:    codecs,
		Direction: dir,
		Proto:     proto,
		Crypto:    crypto,
		Streams:   streams,
	}
	out := p.Rewrite(params)
	body := withoutOrigin(out)
	if st.last != nil && !bytes.Equal(body, st.last) {
		st.version++
		params.Origin.Version = st.version
		out = p.Rewrite(params)
	}
	st.last = body
	return out
}

// withoutOrigin returns sdp without its o= line.
func withoutOrigin(sdp []byte) []byte {
	i := bytes.Index(sdp, []byte("\no="))
	if i < 0 {
		return sdp
	}
	j := bytes.IndexByte(sdp[i+1:], '\n')
	if j < 0 {
		return sdp[:i+1]
	}
	return append(append([]byte(nil), sdp[:i+1]...), sdp[i+1+j+1:]...)
}

func names(cs []sdprewrite.Codec) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// allowed reports whether the session's codec list has name.
func (s *Session) allowed(name string) bool {
	for _, n := range s.codecs {
		if (sdprewrite.Codec{Name: n}).Is(name) {
			return true
		}
	}
	return false
}

func ptTaken(list []sdprewrite.Codec, pt uint8) bool {
	for _, c := range list {
		if c.PT == pt {
			return true
		}
	}
	return false
}

// freeDynamicPT returns a dynamic payload type (RFC 3551 §3: 96–127) not
// in list.
func freeDynamicPT(list []sdprewrite.Codec) uint8 {
	for pt := uint8(101); pt != 100; pt = 96 + (pt-96+1)%32 {
		if !ptTaken(list, pt) {
			return pt
		}
	}
	return 101
}
