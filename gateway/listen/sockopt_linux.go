package listen

import (
	"net"
	"syscall"
)

// setReadBuffer sizes a UDP socket's receive buffer. As root it uses
// SO_RCVBUFFORCE so the size is not capped by net.core.rmem_max (212 KiB by
// default, too small for a registration burst); otherwise it asks politely.
func setReadBuffer(pc net.PacketConn, size int) {
	sc, ok := pc.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	var forced bool
	_ = raw.Control(func(fd uintptr) {
		forced = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, size) == nil
	})
	if !forced {
		if u, ok := pc.(*net.UDPConn); ok {
			_ = u.SetReadBuffer(size)
		}
	}
}
