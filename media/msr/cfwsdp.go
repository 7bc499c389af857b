package msr

import (
	"fmt"
	"net/netip"
	"strings"
)

// The SDP of a control-channel dialog (RFC 6230 §5, with RFC 4145
// COMEDIA and RFC 4572): the offer names the control channel as
//
//	m=application 9 TCP cfw
//	a=setup:active
//	a=connection:new
//	a=cfw-id:H839quwhjdhegvdga
//
// and the answer says where this side listens (the control listener: the
// softswitch connects, so this side is passive) with the same cfw-id,
// which the first SYNC on the channel then names as its Dialog-ID.

// maxCFWID bounds a cfw-id: RFC 6230 makes it a token; a longer one is
// refused rather than remembered.
const maxCFWID = 128

// cfwOffer is what an offer says about a control channel.
type cfwOffer struct {
	proto string // "TCP" or "TCP/TLS"
	setup string // a=setup value, "" when absent (RFC 4145: active)
	id    string // a=cfw-id
	other int    // m-lines other than the cfw one
}

// parseCFWOffer finds the control-channel m-line of an SDP offer. ok is
// false when there is none (an ordinary media offer); err says why an
// offer with one cannot be accepted (answered 488).
func parseCFWOffer(body []byte) (o cfwOffer, ok bool, err error) {
	in := false // inside the cfw m-line's section
	for line := range strings.Lines(string(body)) {
		line = strings.TrimRight(line, "\r\n")
		if v, isM := strings.CutPrefix(line, "m="); isM {
			f := strings.Fields(v)
			in = len(f) == 4 && f[0] == "application" && f[3] == "cfw"
			if !in {
				o.other++
				continue
			}
			if ok {
				return cfwOffer{}, true, fmt.Errorf("more than one cfw m-line")
			}
			ok, o.proto = true, f[2]
			continue
		}
		if !in {
			continue
		}
		if v, isA := strings.CutPrefix(line, "a="); isA {
			name, val, _ := strings.Cut(v, ":")
			switch name {
			case "setup":
				o.setup = strings.TrimSpace(val)
			case "cfw-id":
				o.id = strings.TrimSpace(val)
			}
		}
	}
	if !ok {
		return cfwOffer{}, false, nil
	}
	switch {
	case o.proto == "TCP/TLS":
		return o, true, fmt.Errorf("TLS control channel not supported")
	case o.proto != "TCP":
		return o, true, fmt.Errorf("control channel transport %.20q", o.proto)
	case o.other > 0:
		return o, true, fmt.Errorf("a control-channel dialog carries no media")
	case o.setup == "passive" || o.setup == "holdconn":
		// This side only listens: the softswitch must connect.
		return o, true, fmt.Errorf("a=setup:%s (this side is passive)", o.setup)
	case o.setup != "" && o.setup != "active" && o.setup != "actpass":
		return o, true, fmt.Errorf("a=setup:%.20q", o.setup)
	case o.id == "" || len(o.id) > maxCFWID || !validToken(o.id):
		return o, true, fmt.Errorf("cfw-id missing or not a token")
	}
	return o, true, nil
}

// cfwAnswer is the answer to a control-channel offer: the control
// listener at listen, passive, a new connection, the offer's cfw-id.
func cfwAnswer(listen netip.AddrPort, id, sessID string) []byte {
	af := "IP4"
	if listen.Addr().Is6() && !listen.Addr().Is4In6() {
		af = "IP6"
	}
	a := listen.Addr().Unmap().String()
	return []byte("v=0\r\n" +
		"o=- " + sessID + " 1 IN " + af + " " + a + "\r\n" +
		"s=-\r\n" +
		"c=IN " + af + " " + a + "\r\n" +
		"t=0 0\r\n" +
		fmt.Sprintf("m=application %d TCP cfw\r\n", listen.Port()) +
		"a=setup:passive\r\n" +
		"a=connection:new\r\n" +
		"a=cfw-id:" + id + "\r\n")
}
