package config

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	old := Default()
	if err := old.Seal(nil); err != nil {
		t.Fatal(err)
	}
	next := old.Clone()
	next.SIP.MinExpiresS = 120
	next.Users = append([]User{{Extension: "1000", Name: "Front", HA1MD5: strings.Repeat("a", 32), HA1SHA256: strings.Repeat("b", 64)}}, next.Users...)
	next.Users[2].HA1MD5 = strings.Repeat("c", 32) // 1002's password changed
	next.Users[3].Name = "Renamed"                 // 1003
	next.Dialplan = nil
	got := strings.Join(Diff(old, next), "\n")
	for _, line := range []string{
		`- dialplan[local].route`,
		`+ sip.min_expires: 120`,
		`+ users[1000].name: "Front"`,
		`+ users[1000].ha1_md5: (secret)`,
		`~ users[1002].ha1_md5: (secret changed)`,
		`~ users[1003].name: "Demo 1003" -> "Renamed"`,
	} {
		if !strings.Contains(got, line) {
			t.Errorf("diff lacks %q:\n%s", line, got)
		}
	}
	for _, secret := range []string{strings.Repeat("c", 32), old.Users[1].HA1MD5} {
		if strings.Contains(got, secret) {
			t.Errorf("diff shows a secret:\n%s", got)
		}
	}
	if strings.Contains(got, "users[1001]") {
		t.Errorf("inserting a user shows later users as changed:\n%s", got)
	}
	if d := Diff(old, old.Clone()); len(d) != 0 {
		t.Errorf("no change gives %v", d)
	}
}
