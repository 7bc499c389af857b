//go:build unix

package appliance

import "syscall"

func umask(m int) int { return syscall.Umask(m) }
