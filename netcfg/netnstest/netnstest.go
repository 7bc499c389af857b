// Package netnstest builds throw-away network-namespace topologies for
// tests that need a real kernel: namespaces joined by veth pairs, with
// addresses and routes, all removed when the test ends (also when it
// fails). It needs root and iproute2's ip; without them the test is
// skipped (failed in CI, internal/testenv). Use addresses from the benchmarking ranges 198.18.0.0/15 and
// 2001:2::/48, and never route a namespace to the host.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/outpost/outpost/internal/testenv"
)

var counter atomic.Int64

// Topology is a set of namespaces belonging to one test. Namespaces are
// referred to by short logical names ("box", "hq"); NS maps them to the
// unique kernel names.
type Topology struct {
	t      testing.TB
	prefix string
	ip     string

	mu  sync.Mutex
	nss map[string]string
}

// New returns an empty Topology for t, or skips t under -short, when not
// root or when ip(8) is missing (internal/testenv: in CI those fail t).
func New(t testing.TB) *Topology {
	t.Helper()
	if testing.Short() {
		t.Skip("netnstest: -short: network namespace test (needs root; make test runs it)")
	}
	testenv.NeedRoot(t, "to create network namespaces")
	ip := testenv.NeedTool(t, "ip")
	var b [3]byte
	_, _ = rand.Read(b[:])
	return &Topology{
		t:      t,
		prefix: fmt.Sprintf("ot%d-%d-%s", os.Getpid(), counter.Add(1), hex.EncodeToString(b[:])),
		ip:     ip,
		nss:    map[string]string{},
	}
}

// NS returns the kernel name of the namespace called name, creating it
// (with lo up) on first use. It is deleted in t.Cleanup.
func (tp *Topology) NS(name string) string {
	tp.t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if full, ok := tp.nss[name]; ok {
		return full
	}
	full := tp.prefix + "-" + name
	if out, err := exec.Command(tp.ip, "netns", "add", full).CombinedOutput(); err != nil {
		tp.t.Fatalf("netnstest: ip netns add %s: %v: %s", full, err, out)
	}
	tp.nss[name] = full
	tp.t.Cleanup(func() {
		if out, err := exec.Command(tp.ip, "netns", "del", full).CombinedOutput(); err != nil {
			tp.t.Errorf("netnstest: ip netns del %s: %v: %s", full, err, out)
		}
	})
	tp.run(full, "link", "set", "lo", "up")
	return full
}

// Handle opens the namespace called name (creating it if needed); the
// handle is closed in t.Cleanup. Register cleanups that must run while
// the handle is still open (stopping a watcher) after calling Handle.
func (tp *Topology) Handle(name string) netns.NsHandle {
	tp.t.Helper()
	full := tp.NS(name)
	h, err := netns.GetFromName(full)
	if err != nil {
		tp.t.Fatalf("netnstest: open namespace %s: %v", full, err)
	}
	tp.t.Cleanup(func() { _ = h.Close() })
	return h
}

// IP runs "ip -n NS args..." and returns its output, failing the test on
// error.
func (tp *Topology) IP(ns string, args ...string) string {
	tp.t.Helper()
	return tp.run(tp.NS(ns), args...)
}

func (tp *Topology) run(full string, args ...string) string {
	tp.t.Helper()
	argv := append([]string{"-n", full}, args...)
	out, err := exec.Command(tp.ip, argv...).CombinedOutput()
	if err != nil {
		tp.t.Fatalf("netnstest: ip %s: %v: %s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// Veth creates a veth pair, ifA in nsA and ifB in nsB (both down).
func (tp *Topology) Veth(nsA, ifA, nsB, ifB string) {
	tp.t.Helper()
	b := tp.NS(nsB)
	tp.IP(nsA, "link", "add", ifA, "type", "veth", "peer", "name", ifB, "netns", b)
}

// Addr adds cidr (e.g. 198.18.0.1/24) to interface ifc in ns. IPv6
// addresses are added with nodad, so they are usable at once.
func (tp *Topology) Addr(ns, ifc, cidr string) {
	tp.t.Helper()
	args := []string{"addr", "add", cidr, "dev", ifc}
	if p, err := netip.ParsePrefix(cidr); err == nil && p.Addr().Is6() && !p.Addr().Is4In6() {
		args = append(args, "nodad")
	}
	tp.IP(ns, args...)
}

// Up sets interface ifc in ns administratively up.
func (tp *Topology) Up(ns, ifc string) {
	tp.t.Helper()
	tp.IP(ns, "link", "set", ifc, "up")
}

// Down sets interface ifc in ns administratively down.
func (tp *Topology) Down(ns, ifc string) {
	tp.t.Helper()
	tp.IP(ns, "link", "set", ifc, "down")
}

// Route runs "ip route args..." in ns, e.g.
// Route("box", "add", "default", "via", "198.18.0.2").
func (tp *Topology) Route(ns string, args ...string) {
	tp.t.Helper()
	tp.IP(ns, append([]string{"route"}, args...)...)
}

// Exec runs cmd inside ns with "ip netns exec" and returns its combined
// output, failing the test on error.
func (tp *Topology) Exec(ns string, cmd ...string) string {
	tp.t.Helper()
	out, err := tp.Command(ns, cmd...).CombinedOutput()
	if err != nil {
		tp.t.Fatalf("netnstest: in %s: %s: %v: %s", ns, strings.Join(cmd, " "), err, out)
	}
	return string(out)
}

// Command returns an unstarted command that runs cmd inside ns (for
// long-running helpers; the caller starts, stops and waits for it).
func (tp *Topology) Command(ns string, cmd ...string) *exec.Cmd {
	tp.t.Helper()
	return exec.Command(tp.ip, append([]string{"netns", "exec", tp.NS(ns)}, cmd...)...)
}
