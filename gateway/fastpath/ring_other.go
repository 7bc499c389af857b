//go:build !linux

package fastpath

// newRing returns n bytes (anonymous mappings are Linux only here: ring_linux.go).
func newRing(n int) []byte { return make([]byte, n) }
