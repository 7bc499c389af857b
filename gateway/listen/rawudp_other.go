//go:build !linux

package listen

import "net"

// rawUDPConn returns pc: the raw system calls are Linux only (rawudp_linux.go).
func rawUDPConn(pc net.PacketConn) net.PacketConn { return pc }
