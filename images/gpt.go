package images

import (
	"encoding/binary"
	"fmt"
	"os"
	"unicode/utf16"
)

// gptPartition is one entry of a disk's GPT, as read back from an image.
type gptPartition struct {
	Name        string
	Type, UUID  string
	First, Last int64 // LBAs, inclusive
}

// Offset and Size in bytes.
func (p gptPartition) Offset() int64 { return p.First * 512 }
func (p gptPartition) Size() int64   { return (p.Last - p.First + 1) * 512 }

// readGPT reads the primary GPT of a disk image (512-byte sectors).
func readGPT(path string) (diskUUID string, parts []gptPartition, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	hdr := make([]byte, 512)
	if _, err := f.ReadAt(hdr, 512); err != nil {
		return "", nil, err
	}
	if string(hdr[:8]) != "EFI PART" {
		return "", nil, fmt.Errorf("images: %s has no GPT", path)
	}
	diskUUID = guid(hdr[56:72])
	entLBA := int64(binary.LittleEndian.Uint64(hdr[72:80]))
	n := int(binary.LittleEndian.Uint32(hdr[80:84]))
	size := int(binary.LittleEndian.Uint32(hdr[84:88]))
	ents := make([]byte, n*size)
	if _, err := f.ReadAt(ents, entLBA*512); err != nil {
		return "", nil, err
	}
	for i := 0; i < n; i++ {
		e := ents[i*size : (i+1)*size]
		if allZero(e[:16]) {
			continue
		}
		u16 := make([]uint16, 36)
		for j := range u16 {
			u16[j] = binary.LittleEndian.Uint16(e[56+2*j:])
		}
		name := utf16.Decode(u16)
		for k, r := range name {
			if r == 0 {
				name = name[:k]
				break
			}
		}
		parts = append(parts, gptPartition{Name: string(name), Type: guid(e[0:16]), UUID: guid(e[16:32]),
			First: int64(binary.LittleEndian.Uint64(e[32:40])), Last: int64(binary.LittleEndian.Uint64(e[40:48]))})
	}
	return diskUUID, parts, nil
}

// guid formats a mixed-endian GPT GUID.
func guid(b []byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(b[0:4]), binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]), b[8:10], b[10:16])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// regionZero reports whether n bytes at off of path are all zero.
func regionZero(path string, off, n int64) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return false, err
	}
	return allZero(b), nil
}
