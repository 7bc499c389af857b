//go:build !linux

package listen

import (
	"net"
	"time"
)

// rawUDPConn returns pc: the raw system calls and the socket's timestamps
// are Linux only (rawudp_linux.go).
func rawUDPConn(pc net.PacketConn, _ func(time.Duration)) net.PacketConn { return pc }
