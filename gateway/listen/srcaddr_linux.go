package listen

import (
	"syscall"
	"unsafe"
)

// srcCacheLen is the number of sources a listener keeps, direct-mapped by
// a hash of the raw address: a branch box talks to a few peers over UDP;
// many more (a scan, a flood from forged sources) only evict each other,
// and each then costs what it cost without the cache.
const srcCacheLen = 256

// srcKey is a raw source address: family, port and the (IPv4 or IPv6)
// address bytes, with the IPv6 scope.
type srcKey struct {
	family uint16
	port   uint16
	scope  uint32
	addr   [16]byte
}

type srcCache [srcCacheLen]srcEntry

// unknownSource stands for a source of a family other than IPv4 and IPv6
// (none is expected on a UDP socket).
var unknownSource = &SourceAddr{text: ":0"}

type srcEntry struct {
	key  srcKey
	addr *SourceAddr
}

// lookup returns the source address of rsa, from the cache when it is
// there.
func (c *srcCache) lookup(rsa *syscall.RawSockaddrAny) *SourceAddr {
	var k srcKey
	k.family = rsa.Addr.Family
	switch k.family {
	case syscall.AF_INET:
		sa := (*syscall.RawSockaddrInet4)(unsafe.Pointer(rsa))
		k.port = sa.Port
		copy(k.addr[:], sa.Addr[:])
	case syscall.AF_INET6:
		sa := (*syscall.RawSockaddrInet6)(unsafe.Pointer(rsa))
		k.port, k.scope = sa.Port, sa.Scope_id
		k.addr = sa.Addr
	default:
		return unknownSource
	}
	e := &c[k.hash()%srcCacheLen]
	if e.addr != nil && e.key == k {
		return e.addr
	}
	a := &SourceAddr{UDPAddr: sockaddrToUDP(rsa)}
	a.text = a.UDPAddr.String()
	e.key, e.addr = k, a
	return a
}

// hash is FNV-1a over the key's fields.
func (k *srcKey) hash() uint32 {
	h := uint32(2166136261)
	mix := func(b byte) { h = (h ^ uint32(b)) * 16777619 }
	for _, b := range k.addr {
		mix(b)
	}
	mix(byte(k.port))
	mix(byte(k.port >> 8))
	mix(byte(k.scope))
	return h
}
