package config

import (
	"math/big"
	"slices"
	"strings"
	"testing"
)

func TestNormalizeSerial(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"0A:1B:2C", "a1b2c", true},
		{"0a1b2c", "a1b2c", true},
		{" 00:FF ", "ff", true},
		{"00", "0", true},
		{"1:2:3", "10203", true}, // bytes written without their leading zero: 01:02:03
		{"DEADbeef", "deadbeef", true},
		{"", "", false},
		{"0x1f", "", false},
		{"ab:", "", false},
		{":ab", "", false},
		{"a::b", "", false},
		{"abc:def", "", false},
		{"12 34", "", false},
		{strings.Repeat("f", 65), "", false},
	} {
		got, ok := NormalizeSerial(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("NormalizeSerial(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	// The normal form is what a certificate's serial prints as.
	n, _ := new(big.Int).SetString("00ab0012ff", 16)
	if got, _ := NormalizeSerial("00:AB:00:12:FF"); got != n.Text(16) {
		t.Errorf("NormalizeSerial = %q, big.Int.Text(16) = %q", got, n.Text(16))
	}
	m := Management{RevokedSerials: []string{"0A:0B", "not-hex", "FF"}}
	if got := m.EffectiveRevokedSerials(); !slices.Equal(got, []string{"a0b", "ff"}) {
		t.Errorf("EffectiveRevokedSerials = %q", got)
	}
}

func TestDiffManagementAccess(t *testing.T) {
	old := Default()
	old.Management.AllowedClients = []string{"hq"}
	next := old.Clone()
	next.Management.AllowedClients = append(next.Management.AllowedClients, "noc@example.com")
	next.Management.RevokedSerials = []string{"0a:1b"}
	got := strings.Join(Diff(old, next), "\n")
	for _, line := range []string{
		`+ management.allowed_clients[1]: "noc@example.com"`,
		`+ management.revoked_serials[0]: "0a:1b"`,
	} {
		if !strings.Contains(got, line) {
			t.Errorf("diff lacks %q:\n%s", line, got)
		}
	}
	if strings.Contains(got, "allowed_clients[0]") {
		t.Errorf("diff shows the unchanged entry:\n%s", got)
	}
}
