package b2bua

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
)

// Leg names one side of a bridged call for an Anchor.
type Leg int

// The two sides of a bridge.
const (
	// LegA is the calling side: the caller, or the transferee in a bridge
	// made by a transfer.
	LegA Leg = iota
	// LegB is the called side: the callee, the voicemail pilot, or the
	// transfer target.
	LegB
)

func (l Leg) other() Leg { return 1 - l }

func (l Leg) String() string {
	if l == LegA {
		return "A"
	}
	return "B"
}

// Anchor is the media of one bridge (RFC 3264 offer/answer seen from the
// middle). Every SDP body the B2BUA relays passes through it: the offer of
// the initial INVITE, the answers in 18x and 2xx, the offers and answers
// of re-INVITEs and UPDATEs in both directions, and the offers built for a
// transfer. The returned SDP is what the other leg receives. An error
// refuses the exchange: the offering side gets 488.
//
// Calls on one Anchor are serialised by the B2BUA (one offer/answer
// exchange at a time per bridge); Close is called exactly once, on every
// path that ends the bridge (hang-up, failure, transfer to a new bridge).
type Anchor interface {
	// Offer rewrites an offer that arrived from leg from for the other leg.
	Offer(from Leg, sdp []byte) ([]byte, error)
	// Answer rewrites an answer that arrived from leg from (to the other
	// leg's offer) for the other leg.
	Answer(from Leg, sdp []byte) ([]byte, error)
	// Reject says that the last offer from leg from was refused or
	// abandoned: the session before it stays in force.
	Reject(from Leg)
	// Close releases the media of the bridge.
	Close()
}

// MediaFunc makes the Anchor of a new bridge. callID names the bridge
// (the CDR's CallID); legA and legB are our local addresses facing each
// leg. onDead, called by the anchor (at most once; later calls are
// ignored), ends the call with disposition media-timeout and the reason in
// the log. An error refuses the call with 488.
type MediaFunc func(callID string, legA, legB netip.Addr, onDead func(reason string)) (Anchor, error)

// errNotSDP refuses a body the B2BUA cannot relay.
var errNotSDP = errors.New("b2bua: body is not application/sdp")

// origin is an SDP o= line (RFC 4566 §5.2).
type origin struct {
	user, sessID string
	version      uint64
	rest         string // nettype addrtype address
	ok           bool
}

// sdpLines splits a body into lines without their terminators; eol is
// the first terminator seen ("\r\n" or "\n").
func sdpLines(sdp []byte) (lines [][]byte, eol []byte) {
	eol = []byte("\r\n")
	if i := bytes.IndexByte(sdp, '\n'); i >= 0 && (i == 0 || sdp[i-1] != '\r') {
		eol = []byte("\n")
	}
	for len(sdp) > 0 {
		i := bytes.IndexByte(sdp, '\n')
		if i < 0 {
			lines = append(lines, sdp)
			break
		}
		lines = append(lines, bytes.TrimSuffix(sdp[:i], []byte("\r")))
		sdp = sdp[i+1:]
	}
	return lines, eol
}

func joinLines(lines [][]byte, eol []byte) []byte {
	out := bytes.Join(lines, eol)
	return append(out, eol...)
}

func parseOrigin(sdp []byte) origin {
	lines, _ := sdpLines(sdp)
	for _, l := range lines {
		if !bytes.HasPrefix(l, []byte("o=")) {
			continue
		}
		f := bytes.Fields(l[2:])
		if len(f) != 6 {
			return origin{}
		}
		v, err := strconv.ParseUint(string(f[2]), 10, 64)
		if err != nil {
			return origin{}
		}
		return origin{user: string(f[0]), sessID: string(f[1]), version: v,
			rest: string(f[3]) + " " + string(f[4]) + " " + string(f[5]), ok: true}
	}
	return origin{}
}

func (o origin) line() []byte {
	return []byte("o=" + o.user + " " + o.sessID + " " + strconv.FormatUint(o.version, 10) + " " + o.rest)
}

func (o origin) sameSession(p origin) bool {
	return o.user == p.user && o.sessID == p.sessID && o.rest == p.rest
}

func withOrigin(sdp []byte, o origin) []byte {
	lines, eol := sdpLines(sdp)
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("o=")) {
			lines[i] = o.line()
			return joinLines(lines, eol)
		}
	}
	return sdp
}

// sdpDirection is the first direction attribute of sdp (media level wins
// over session level only by coming later; one audio stream is the case
// that matters): "sendrecv" when none is given (RFC 3264 §5.1).
func sdpDirection(sdp []byte) string {
	dir := "sendrecv"
	lines, _ := sdpLines(sdp)
	for _, l := range lines {
		switch string(l) {
		case "a=sendonly", "a=recvonly", "a=inactive", "a=sendrecv":
			dir = string(l[2:])
		}
	}
	return dir
}

// withSendrecv turns every direction attribute into a=sendrecv: a session
// description remembered from a held call becomes a fresh offer for a new
// party (a transfer), which must not start on hold.
func withSendrecv(sdp []byte) []byte {
	lines, eol := sdpLines(sdp)
	changed := false
	for i, l := range lines {
		switch string(l) {
		case "a=sendonly", "a=recvonly", "a=inactive":
			lines[i], changed = []byte("a=sendrecv"), true
		}
	}
	if !changed {
		return sdp
	}
	return joinLines(lines, eol)
}

// isSDP reports whether a body with Content-Type ct can be relayed as a
// session description.
func isSDP(ct string) bool {
	mt, _, _ := bytes.Cut([]byte(ct), []byte(";"))
	return bytes.EqualFold(bytes.TrimSpace(mt), []byte("application/sdp"))
}
