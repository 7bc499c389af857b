package layout

import (
	"fmt"
	"strings"
)

// MiB is the unit of every size in the layout.
const MiB = 1 << 20

// GPT partition type GUIDs.
const (
	TypeESP   = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b" // EFI system partition
	TypeLinux = "0fc63daf-8483-4772-8e79-3d69d8477de4" // Linux filesystem data
)

// DiskUUID is the GPT disk GUID of every image. Fixed for reproducible
// builds; two boxes are told apart by their certificates, not by GUIDs.
const DiskUUID = "db044852-d4af-4ce3-a655-929bc358c69c"

// Partition is one GPT entry.
type Partition struct {
	Name   string // GPT partition name (PARTNAME= in uevent, PARTLABEL= on the kernel command line)
	Number int    // 1-based; GRUB's gptN
	Type   string // partition type GUID
	UUID   string // fixed partition GUID
	Size   int64  // bytes
}

// Partition names.
const (
	ESP   = "esp"
	RootA = "rootA"
	RootB = "rootB"
	Data  = "data"
)

// Partitions is the layout, in disk order. Sizes: the ESP holds GRUB (~2
// MB) and, on a Raspberry Pi, its firmware and U-Boot (~10 MB); a slot
// holds a squashfs of 15–40 MB (Debian kernel or Buildroot's, modules,
// busybox, outpostd) with room to grow; data holds SQLite and spools and is
// formatted on the first boot.
var Partitions = []Partition{
	{Name: ESP, Number: 1, Type: TypeESP, UUID: "d02a9bea-e580-42c6-801d-80fb1a662dc0", Size: 32 * MiB},
	{Name: RootA, Number: 2, Type: TypeLinux, UUID: "46d19d21-ca7e-4ae4-ac60-6224d66f37b8", Size: 160 * MiB},
	{Name: RootB, Number: 3, Type: TypeLinux, UUID: "0cf6ee41-ecf6-4e79-945b-c1e203cfab62", Size: 160 * MiB},
	{Name: Data, Number: 4, Type: TypeLinux, UUID: "ec44e2b2-e0e3-4754-9f6d-df04705f0603", Size: 128 * MiB},
}

// FirstOffset is where the first partition starts (1 MiB alignment).
const FirstOffset = 1 * MiB

// Lookup returns the partition called name.
func Lookup(name string) (Partition, bool) {
	for _, p := range Partitions {
		if p.Name == name {
			return p, true
		}
	}
	return Partition{}, false
}

// SlotSize is the largest slot image a bundle may carry.
func SlotSize() int64 {
	p, _ := Lookup(RootA)
	return p.Size
}

// Slot is an A/B root slot.
type Slot string

// The two slots.
const (
	SlotA Slot = "A"
	SlotB Slot = "B"
)

// ParseSlot accepts "A" or "B" (any case).
func ParseSlot(s string) (Slot, error) {
	switch strings.ToUpper(s) {
	case "A":
		return SlotA, nil
	case "B":
		return SlotB, nil
	}
	return "", fmt.Errorf("layout: slot %q is neither A nor B", s)
}

// Other is the slot that is not s.
func (s Slot) Other() Slot {
	if s == SlotB {
		return SlotA
	}
	return SlotB
}

// Partition is the name of the slot's root partition ("rootA").
func (s Slot) Partition() string { return "root" + string(s) }

// Kernel command line parameters the boot loader passes.
const (
	CmdlineSlot  = "outpost.slot"  // booted slot, A or B
	CmdlineTrial = "outpost.trial" // 1 on the one trial boot of an update
)

// Boot is what the kernel command line says about this boot.
type Boot struct {
	Slot  Slot
	Trial bool
}

// ParseCmdline reads outpost.slot and outpost.trial from a kernel command
// line (/proc/cmdline). ok is false when the box was not booted by the A/B
// boot loader (a development host, a VM booted with -kernel).
func ParseCmdline(cmdline string) (b Boot, ok bool) {
	for _, f := range strings.Fields(cmdline) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case CmdlineSlot:
			s, err := ParseSlot(v)
			if err != nil {
				return Boot{}, false
			}
			b.Slot, ok = s, true
		case CmdlineTrial:
			b.Trial = v == "1"
		}
	}
	return b, ok
}
