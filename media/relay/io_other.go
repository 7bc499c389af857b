//go:build !linux

package relay

import "net"

const batchSupported = false

func (s *Session) readBatched(f *forwarder, conn *net.UDPConn, rtcp bool, n int) {
	panic("media/relay: batched I/O needs Linux")
}
