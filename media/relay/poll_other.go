//go:build !linux

package relay

import "net/netip"

// pollSupported: no relay pollers here; sessions use goroutine readers.
const pollSupported = false

type pollSet struct{}

type poller struct{}

func (ps *pollSet) forSession() *poller { panic("media/relay: pollers need Linux") }

func (p *poller) add(*Session, *forwarder, *pair) error { panic("media/relay: pollers need Linux") }

func (p *poller) remove(*pair) {}

func bindRawPair(netip.Addr, int, int) (*pair, error) { panic("media/relay: pollers need Linux") }

func closeRaw(*pair) {}

// sendRTP sends one datagram from the pair's RTP socket (music on hold).
func (pr *pair) sendRTP(b []byte, dst netip.AddrPort) { _, _ = pr.rtp.WriteToUDPAddrPort(b, dst) }
