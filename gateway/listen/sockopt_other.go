//go:build !linux

package listen

import "net"

func setReadBuffer(pc net.PacketConn, size int) {
	if u, ok := pc.(*net.UDPConn); ok {
		_ = u.SetReadBuffer(size)
	}
}
