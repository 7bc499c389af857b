package fastpath

import "golang.org/x/sys/unix"

// newRing returns n bytes of anonymous memory that costs nothing until
// written: a Go allocation this large may be zeroed at once (when its
// pages are reused), which would put the whole ring in the resident set
// of a box that sees a few phones. The ring is never freed: a Path lives
// as long as its gateway.
func newRing(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n)
	}
	return b
}
