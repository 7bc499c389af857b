package layout

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ReleaseFile is where a slot image records its build, relative to the
// slot's root (/etc/outpost/release on a running box). The offline builder
// (package images) and the Buildroot board both write it.
const ReleaseFile = "etc/outpost/release"

// Release is a slot image's record of its build: shell-style KEY=value
// lines (the post-image script sources it).
//
//	VERSION=v1.2.3-4-gabcdef     git describe (Makefile VERSION)
//	ARCH=arm64
//	KERNEL=6.1.0-21-arm64
//	BUILD_EPOCH=1717000000       SOURCE_DATE_EPOCH of the build
type Release struct {
	Version string
	Arch    string
	Kernel  string
	Epoch   int64 // 0: not recorded (an image from before the field)
}

// Encode writes r as the release file.
func (r Release) Encode() []byte {
	return fmt.Appendf(nil, "VERSION=%s\nARCH=%s\nKERNEL=%s\nBUILD_EPOCH=%d\n", r.Version, r.Arch, r.Kernel, r.Epoch)
}

// ParseRelease reads a release file. Unknown keys, blank lines and '#'
// comments are ignored, values may be quoted; a missing BUILD_EPOCH leaves
// Epoch 0, one that is not a positive number of seconds is an error.
func ParseRelease(b []byte) (Release, error) {
	var r Release
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Release{}, fmt.Errorf("layout: release: line %q is not KEY=value", line)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		switch k {
		case "VERSION":
			r.Version = v
		case "ARCH":
			r.Arch = v
		case "KERNEL":
			r.Kernel = v
		case "BUILD_EPOCH":
			if v == "" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return Release{}, fmt.Errorf("layout: release: BUILD_EPOCH=%q is not a positive number of seconds", v)
			}
			r.Epoch = n
		}
	}
	return r, nil
}

// ErrDowngrade is matched (errors.Is) by the refusal of a bundle older than
// the installed system. It is not an ErrBundle: the bundle is sound, and
// the installer may take it when told to (allow downgrade).
var ErrDowngrade = errors.New("bundle is older than the installed firmware")

// CheckDowngrade is the anti-rollback rule. Versions are `git describe`
// strings (v1.2.3, v1.2.3-4-gabcdef, abcdef without tags, dev) and do not
// order; builds do: a bundle's Created is the SOURCE_DATE_EPOCH it was
// built with (the commit time), as is the installed image's BUILD_EPOCH.
// A bundle is older, and refused with ErrDowngrade naming both versions,
// when its Created is before the installed epoch; an equal epoch (a
// rebuild, the same commit) or a later one passes. A bundle without
// Created (0) counts as older than any recorded epoch. An installed
// system that recorded no epoch (installed.Epoch == 0) cannot be compared:
// every bundle passes, and the caller says so in its log.
func (m *Manifest) CheckDowngrade(installed Release) error {
	if installed.Epoch == 0 || m.Created >= installed.Epoch {
		return nil
	}
	return fmt.Errorf("%w: bundle %s (built %s) is older than the installed %s (built %s)", ErrDowngrade,
		orUnknown(m.Version), epochString(m.Created), orUnknown(installed.Version), epochString(installed.Epoch))
}

func orUnknown(v string) string {
	if v == "" {
		return "(no version)"
	}
	return v
}

func epochString(s int64) string {
	if s <= 0 {
		return "at an unknown time"
	}
	return time.Unix(s, 0).UTC().Format(time.RFC3339)
}
