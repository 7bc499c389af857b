package images

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"
)

// normalizeFAT sets every timestamp in the directory tree of the FAT
// filesystem at off in path to t. mtools (Debian 12: 4.0.33) stamps the
// directories it creates with the current time and knows no
// SOURCE_DATE_EPOCH, which makes the ESP, and so the disk image, differ
// between two builds of the same inputs.
func normalizeFAT(path string, off int64, t time.Time) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	bs := make([]byte, 512)
	if _, err := f.ReadAt(bs, off); err != nil {
		return err
	}
	le := binary.LittleEndian
	bps := int64(le.Uint16(bs[11:]))
	spc := int64(bs[13])
	reserved := int64(le.Uint16(bs[14:]))
	nfats := int64(bs[16])
	rootEntries := int64(le.Uint16(bs[17:]))
	total := int64(le.Uint16(bs[19:]))
	if total == 0 {
		total = int64(le.Uint32(bs[32:]))
	}
	fatSize := int64(le.Uint16(bs[22:]))
	if fatSize == 0 {
		fatSize = int64(le.Uint32(bs[36:]))
	}
	if bps == 0 || spc == 0 || nfats == 0 || bs[510] != 0x55 || bs[511] != 0xAA {
		return fmt.Errorf("images: %s at %d is not a FAT filesystem", path, off)
	}
	rootSectors := (rootEntries*32 + bps - 1) / bps
	firstData := reserved + nfats*fatSize + rootSectors
	clusters := (total - firstData) / spc
	bits := 32
	switch {
	case clusters < 4085:
		bits = 12
	case clusters < 65525:
		bits = 16
	}
	fat := make([]byte, fatSize*bps)
	if _, err := f.ReadAt(fat, off+reserved*bps); err != nil {
		return err
	}
	next := func(c uint32) uint32 {
		switch bits {
		case 12:
			v := le.Uint16(fat[c+c/2:])
			if c&1 == 1 {
				return uint32(v >> 4)
			}
			return uint32(v & 0xFFF)
		case 16:
			return uint32(le.Uint16(fat[2*c:]))
		}
		return le.Uint32(fat[4*c:]) & 0x0FFFFFFF
	}
	eoc := map[int]uint32{12: 0xFF8, 16: 0xFFF8, 32: 0x0FFFFFF8}[bits]
	clusterOff := func(c uint32) int64 { return off + (firstData+int64(c-2)*spc)*bps }
	utc := t.UTC()
	dosDate := uint16((utc.Year()-1980)<<9 | int(utc.Month())<<5 | utc.Day())
	dosTime := uint16(utc.Hour()<<11 | utc.Minute()<<5 | utc.Second()/2)

	// stamp rewrites the entries of one directory region, returning the
	// clusters of its subdirectories.
	stamp := func(at, size int64) ([]uint32, bool, error) {
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, at); err != nil {
			return nil, false, err
		}
		var subdirs []uint32
		end := false
		for i := 0; i+32 <= len(buf); i += 32 {
			e := buf[i : i+32]
			if e[0] == 0 {
				end = true
				break
			}
			if e[0] == 0xE5 || e[11] == 0x0F {
				continue // deleted, or a long-name part (no times)
			}
			e[13] = 0
			le.PutUint16(e[14:], dosTime)
			le.PutUint16(e[16:], dosDate)
			le.PutUint16(e[18:], dosDate)
			le.PutUint16(e[22:], dosTime)
			le.PutUint16(e[24:], dosDate)
			if e[11]&0x10 != 0 && e[0] != '.' {
				subdirs = append(subdirs, uint32(le.Uint16(e[20:]))<<16|uint32(le.Uint16(e[26:])))
			}
		}
		_, err := f.WriteAt(buf, at)
		return subdirs, end, err
	}
	walkChain := func(c uint32) ([]uint32, error) {
		var subdirs []uint32
		for n := 0; c >= 2 && c < eoc; n++ {
			if n > 1<<20 {
				return nil, fmt.Errorf("images: FAT cluster chain loops")
			}
			s, end, err := stamp(clusterOff(c), spc*bps)
			if err != nil {
				return nil, err
			}
			subdirs = append(subdirs, s...)
			if end {
				break
			}
			c = next(c)
		}
		return subdirs, nil
	}
	var todo []uint32
	if bits == 32 {
		todo = append(todo, le.Uint32(bs[44:]))
	} else {
		s, _, err := stamp(off+(reserved+nfats*fatSize)*bps, rootSectors*bps)
		if err != nil {
			return err
		}
		todo = s
	}
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		s, err := walkChain(c)
		if err != nil {
			return err
		}
		todo = append(todo, s...)
	}
	return nil
}
