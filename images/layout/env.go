package layout

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// EnvSize is the size of a GRUB environment block (grub-editenv's default;
// GRUB's save_env rewrites the file in place and never changes its size).
const EnvSize = 1024

// EnvFile is the block's path on the ESP.
const EnvFile = "grubenv"

const envHeader = "# GRUB Environment Block\n"

// Keys of the environment block. grub.cfg (beside the Buildroot board)
// reads slot, next, upgrade and cmdline; only the box writes failed.
const (
	KeySlot    = "slot"    // committed slot: A or B
	KeyNext    = "next"    // slot written by an update, booted once when upgrade=1
	KeyUpgrade = "upgrade" // "1": the next boot is the trial of next (GRUB sets it to 0 before booting)
	KeyFailed  = "failed"  // slot whose trial boot did not become healthy (informational)
	KeyCmdline = "cmdline" // extra kernel parameters (field debugging)
)

// Env is a GRUB environment block.
type Env map[string]string

// FactoryEnv is the block of a freshly flashed image: slot A committed.
func FactoryEnv() Env { return Env{KeySlot: string(SlotA)} }

// ErrEnv marks a block that is not a GRUB environment block.
var ErrEnv = errors.New("layout: not a GRUB environment block")

// ParseEnv reads a block as GRUB does: the header line, then name=value
// lines, then '#' padding.
func ParseEnv(b []byte) (Env, error) {
	if len(b) != EnvSize || !bytes.HasPrefix(b, []byte(envHeader)) {
		return nil, fmt.Errorf("%w (%d bytes)", ErrEnv, len(b))
	}
	e := Env{}
	for _, line := range strings.Split(string(b[len(envHeader):]), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%w: line %q", ErrEnv, line)
		}
		// GRUB escapes '\' and newline with a backslash; this package
		// never writes either, so unescaping the backslash is enough.
		e[k] = strings.ReplaceAll(v, `\\`, `\`)
	}
	return e, nil
}

// Encode writes the block with its keys sorted, padded to EnvSize.
func (e Env) Encode() ([]byte, error) {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString(envHeader)
	for _, k := range keys {
		v := e[k]
		if k == "" || strings.ContainsAny(k, "=\n\\") || strings.ContainsAny(v, "\n\\") {
			return nil, fmt.Errorf("layout: environment entry %q=%q cannot be encoded", k, v)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	if b.Len() > EnvSize {
		return nil, fmt.Errorf("layout: environment block needs %d bytes, has %d", b.Len(), EnvSize)
	}
	b.Write(bytes.Repeat([]byte{'#'}, EnvSize-b.Len()))
	return b.Bytes(), nil
}

func (e Env) clone() Env {
	c := make(Env, len(e))
	for k, v := range e {
		c[k] = v
	}
	return c
}

// Committed is the slot GRUB boots when no trial is pending: slot, or A
// when the entry is missing or unreadable (as grub.cfg decides).
func (e Env) Committed() Slot {
	if e[KeySlot] == string(SlotB) {
		return SlotB
	}
	return SlotA
}

// Pending is the slot whose trial boot comes next, if any.
func (e Env) Pending() (Slot, bool) {
	if e[KeyUpgrade] != "1" {
		return "", false
	}
	s, err := ParseSlot(e[KeyNext])
	return s, err == nil
}

// Boot is what GRUB does with the block: the slot it boots and the block
// it leaves behind. It is the executable description of grub.cfg, which a
// test compares line by line with this function's rules.
func (e Env) Boot() (Boot, Env) {
	after := e.clone()
	if s, ok := e.Pending(); ok {
		after[KeyUpgrade] = "0"
		return Boot{Slot: s, Trial: true}, after
	}
	return Boot{Slot: e.Committed()}, after
}

// StartTrial arranges one trial boot of target, which the caller has just
// written. The committed slot must be the other one: the box never
// overwrites the slot it would fall back to.
func (e Env) StartTrial(target Slot) (Env, error) {
	if target == e.Committed() {
		return nil, fmt.Errorf("layout: slot %s is the committed slot; an update writes the other one", target)
	}
	n := e.clone()
	if _, ok := n[KeySlot]; !ok {
		n[KeySlot] = string(e.Committed())
	}
	n[KeyNext] = string(target)
	n[KeyUpgrade] = "1"
	delete(n, KeyFailed)
	return n, nil
}

// Outcome is what Confirm found.
type Outcome int

const (
	// Unchanged: an ordinary boot of the committed slot.
	Unchanged Outcome = iota
	// Committed: this trial boot became healthy; its slot is now committed.
	Committed
	// RolledBack: a trial of the other slot happened and did not become
	// healthy, so GRUB booted the committed slot again.
	RolledBack
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case RolledBack:
		return "rolled back"
	}
	return "unchanged"
}

// Confirm is called once the booted system is healthy. A trial boot of
// next commits its slot; a healthy boot of the committed slot while next
// is still recorded (and no longer pending) means next's trial failed.
func (e Env) Confirm(b Boot) (Env, Outcome) {
	n := e.clone()
	switch next := e[KeyNext]; {
	case b.Trial && next == string(b.Slot):
		n[KeySlot] = string(b.Slot)
		delete(n, KeyNext)
		delete(n, KeyUpgrade)
		delete(n, KeyFailed)
		return n, Committed
	case !b.Trial && next != "" && e[KeyUpgrade] != "1" && b.Slot == e.Committed():
		n[KeyFailed] = next
		delete(n, KeyNext)
		delete(n, KeyUpgrade)
		return n, RolledBack
	}
	return e, Unchanged
}
