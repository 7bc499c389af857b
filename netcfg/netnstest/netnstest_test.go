package netnstest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost/outpost/netcfg/netnstest"
)

func TestTopology(t *testing.T) {
	var names []string
	t.Run("build", func(t *testing.T) {
		topo := netnstest.New(t)
		topo.Veth("a", "lan0", "b", "lan0p")
		topo.Addr("a", "lan0", "198.18.9.1/24")
		topo.Addr("b", "lan0p", "198.18.9.2/24")
		topo.Addr("a", "lan0", "2001:2:0:9::1/64") // nodad: usable at once
		topo.Up("a", "lan0")
		topo.Up("b", "lan0p")
		topo.Route("b", "add", "default", "via", "198.18.9.1")
		out := topo.IP("a", "-6", "addr", "show", "dev", "lan0", "scope", "global")
		if !strings.Contains(out, "2001:2:0:9::1/64") || strings.Contains(out, "tentative") {
			t.Errorf("IPv6 address missing or tentative despite nodad: %s", out)
		}
		out = topo.Exec("b", "ip", "route", "show", "default")
		if !strings.Contains(out, "via 198.18.9.1 dev lan0p") {
			t.Errorf("default route in b: %q", out)
		}
		topo.Down("a", "lan0")
		names = []string{topo.NS("a"), topo.NS("b")}
		if names[0] == names[1] || topo.NS("a") != names[0] {
			t.Errorf("namespace names %v", names)
		}
	})
	for _, n := range names {
		if _, err := os.Stat(filepath.Join("/run/netns", n)); !os.IsNotExist(err) {
			t.Errorf("namespace %s left behind (%v)", n, err)
		}
	}
}
