//go:build unix

package ctl

import (
	"os"

	"golang.org/x/sys/unix"
)

// winsizeCols is the terminal's width in columns, 0 when unknown.
func winsizeCols(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
