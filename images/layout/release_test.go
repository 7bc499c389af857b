package layout

import (
	"errors"
	"strings"
	"testing"
)

func TestReleaseRoundTrip(t *testing.T) {
	r := Release{Version: "v1.2.3-4-gabcdef", Arch: "arm64", Kernel: "6.1.0-21-arm64", Epoch: 1717000000}
	b := r.Encode()
	if string(b) != "VERSION=v1.2.3-4-gabcdef\nARCH=arm64\nKERNEL=6.1.0-21-arm64\nBUILD_EPOCH=1717000000\n" {
		t.Fatalf("Encode = %q", b)
	}
	if got, err := ParseRelease(b); err != nil || got != r {
		t.Fatalf("ParseRelease = %+v, %v", got, err)
	}
	// Buildroot: VERSION and ARCH from the package, BUILD_EPOCH appended.
	got, err := ParseRelease([]byte("# comment\nVERSION='v2'\nARCH=amd64\n\nOTHER=x\nBUILD_EPOCH=5\n"))
	if err != nil || got != (Release{Version: "v2", Arch: "amd64", Epoch: 5}) {
		t.Errorf("buildroot release = %+v, %v", got, err)
	}
	// An older image records no epoch: 0, not an error.
	if got, err := ParseRelease([]byte("VERSION=dev\nARCH=amd64\n")); err != nil || got.Epoch != 0 {
		t.Errorf("no epoch = %+v, %v", got, err)
	}
	for _, bad := range []string{"BUILD_EPOCH=yesterday\n", "BUILD_EPOCH=-5\n", "VERSION\n"} {
		if _, err := ParseRelease([]byte(bad)); err == nil {
			t.Errorf("ParseRelease(%q) accepted", bad)
		}
	}
}

func TestCheckDowngrade(t *testing.T) {
	installed := Release{Version: "v1.3.0", Epoch: 2000}
	for _, c := range []struct {
		name    string
		m       Manifest
		in      Release
		refused bool
	}{
		{"newer", Manifest{Version: "v1.4.0", Created: 3000}, installed, false},
		{"same build", Manifest{Version: "v1.3.0", Created: 2000}, installed, false},
		// Versions do not order (git describe); epochs do.
		{"older epoch, larger-looking version", Manifest{Version: "v9.9.9", Created: 1999}, installed, true},
		{"newer epoch, untagged version", Manifest{Version: "abcdef", Created: 2001}, installed, false},
		{"bundle without epoch", Manifest{Version: "dev"}, installed, true},
		{"installed without epoch", Manifest{Version: "v0.1", Created: 1}, Release{Version: "v1.3.0"}, false},
	} {
		err := c.m.CheckDowngrade(c.in)
		if refused := errors.Is(err, ErrDowngrade); refused != c.refused {
			t.Errorf("%s: err = %v, refused %v", c.name, err, c.refused)
		}
		if errors.Is(err, ErrBundle) {
			t.Errorf("%s: a downgrade is not a bad bundle: %v", c.name, err)
		}
	}
	err := (&Manifest{Version: "v1.2.0", Created: 1000}).CheckDowngrade(installed)
	for _, want := range []string{"v1.2.0", "v1.3.0", "1970-01-01T00:16:40Z", "1970-01-01T00:33:20Z"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %v does not say %q", err, want)
		}
	}
}
