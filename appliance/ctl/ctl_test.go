package ctl

import (
	"fmt"
	"testing"
)

func TestHoistGlobalFlags(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"status", "--json"}, []string{"--json", "status"}},
		{[]string{"config", "apply", "f.json", "--socket", "/s", "--dry-run"}, []string{"--socket", "/s", "config", "apply", "f.json", "--dry-run"}},
		{[]string{"--socket=/s", "config", "get", "--version", "3", "-json"}, []string{"--socket=/s", "-json", "config", "get", "--version", "3"}},
	} {
		if got := hoistGlobalFlags(c.in); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("hoist(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
