package images

import (
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func hostArch() string { return runtime.GOARCH }

// qemuArch is qemu's name for a Go architecture.
func qemuArch(arch string) string {
	if arch == "arm64" {
		return "aarch64"
	}
	return "x86_64"
}

func lchtimes(path string, t time.Time) error {
	ts := unix.NsecToTimespec(t.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

func allocatedBytes(fi interface{ Sys() any }) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return 0
}
