package relay

import (
	"fmt"
	"strings"
	"time"
)

// Latching says which source addresses a leg's media is accepted from
// (symmetric RTP, RFC 4961: the box sends to the address it accepts from).
type Latching string

const (
	// LatchSignalled accepts RTP and RTCP only from the address and port
	// the leg's SDP announced (RTCP: a=rtcp, else the RTP port + 1). A
	// stranger can never inject or hijack. The default.
	LatchSignalled Latching = "signalled"
	// LatchFirstPackets accepts any source for the first
	// Config.LatchPackets packets of a stream, follows the latest of
	// them, then locks onto it; a packet from the signalled address
	// locks at once. For phones behind NAT that do not send from where
	// they said. A new SDP from the leg starts learning again.
	LatchFirstPackets Latching = "first-packets"
)

// Defaults of the zero Config fields.
const (
	DefaultPortMin      = 16384
	DefaultPortMax      = 32767
	DefaultLatchPackets = 5
	// DefaultSocketBuffer is the receive buffer asked for each media
	// socket; the kernel caps it at net.core.rmem_max.
	DefaultSocketBuffer = 512 << 10
)

// DefaultCodecs is the codec preference list when Config.Codecs is empty.
var DefaultCodecs = []string{"PCMU", "PCMA", "telephone-event"}

// Config tunes a Relay. The zero value is usable: ports 16384–32767,
// PCMU/PCMA/telephone-event, signalled latching, no inactivity timeout.
type Config struct {
	// PortMin and PortMax bound the RTP/RTCP ports (inclusive). RTP ports
	// are even, RTCP = RTP + 1 (RFC 3550 §11). Changes apply to ports
	// allocated afterwards.
	PortMin, PortMax int
	// Codecs lists the encoding names the relay lets through, in
	// preference order (e.g. "PCMU", "PCMA", "telephone-event"). When
	// both PCMU and PCMA are listed the relay transcodes between them.
	// Applies to sessions created afterwards.
	Codecs []string
	// Latching is the source-address policy (default LatchSignalled).
	Latching Latching
	// LatchPackets is N for LatchFirstPackets (default 5).
	LatchPackets int
	// InactivityTimeout: an established, not-held session whose leg sends
	// no RTP for this long gets OnInactive (0 = off; the appliance sets
	// e.g. 30 s). Applies to sessions created afterwards.
	InactivityTimeout time.Duration
	// SocketBuffer is SO_RCVBUF for every media socket (default 512 KiB).
	SocketBuffer int
	// Batch > 1 gives each session socket a reader goroutine of its own
	// using recvmmsg/sendmmsg with up to Batch datagrams per system call
	// (Linux only; elsewhere ignored). 0 or 1, the default: on Linux the
	// relay's pollers serve the sockets (up to 8 datagrams per socket and
	// round; see the package doc and bench/RESULTS.md for why).
	// Applies to sessions created afterwards.
	Batch int
	// SRTP is the SDES-SRTP policy of every leg whose SessionConfig.SRTP
	// entry is empty (default SRTPOff). Applies to sessions created
	// afterwards.
	SRTP SRTPPolicy
	// MusicOnHold is what a held leg hears (moh.go): µ-law samples at
	// 8 kHz, looped; nil = nothing of the box's (the held leg gets what
	// the holder sends, if anything). Applies to sessions created
	// afterwards.
	MusicOnHold []byte `json:"-"`
}

// Check returns c with its zero fields filled in, or what is wrong with it:
// what New and Reconfigure would refuse.
func (c Config) Check() (Config, error) { return c.withDefaults() }

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.PortMin == 0 && c.PortMax == 0 {
		c.PortMin, c.PortMax = DefaultPortMin, DefaultPortMax
	}
	if c.PortMin%2 == 1 {
		c.PortMin++ // RTP ports are even
	}
	if c.PortMin < 1024 || c.PortMax > 65535 || c.PortMax < c.PortMin+1 {
		return c, fmt.Errorf("media/relay: port range %d-%d: need 1024 <= min < max <= 65535 with room for one RTP/RTCP pair", c.PortMin, c.PortMax)
	}
	if len(c.Codecs) == 0 {
		c.Codecs = DefaultCodecs
	}
	c.Codecs = append([]string(nil), c.Codecs...)
	for _, n := range c.Codecs {
		if n == "" || strings.ContainsAny(n, " /\t\r\n") {
			return c, fmt.Errorf("media/relay: codec name %q", n)
		}
	}
	switch c.Latching {
	case "":
		c.Latching = LatchSignalled
	case LatchSignalled, LatchFirstPackets:
	default:
		return c, fmt.Errorf("media/relay: latching policy %q (want %q or %q)", c.Latching, LatchSignalled, LatchFirstPackets)
	}
	if c.LatchPackets <= 0 {
		c.LatchPackets = DefaultLatchPackets
	}
	if c.InactivityTimeout < 0 {
		return c, fmt.Errorf("media/relay: negative inactivity timeout %v", c.InactivityTimeout)
	}
	if c.Batch < 0 || c.Batch > 1024 {
		return c, fmt.Errorf("media/relay: batch size %d (want 0..1024)", c.Batch)
	}
	if c.SRTP == "" {
		c.SRTP = SRTPOff
	}
	if err := c.SRTP.check(); err != nil {
		return c, err
	}
	if c.SocketBuffer <= 0 {
		c.SocketBuffer = DefaultSocketBuffer
	}
	return c, nil
}
