package relay

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/outpost/outpost/netcfg/netnstest"
)

// inNS runs fn on a thread switched into namespace h. Sockets created by
// fn stay in h; goroutines it starts do not inherit the namespace (the
// relay's readers only use sockets that already exist).
func inNS(t *testing.T, h netns.NsHandle, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic("cannot return to the original network namespace: " + err.Error())
		}
	}()
	fn()
}

// Two phones in two namespaces, each on its own interface of the box
// namespace (lan0 and voice0, different subnets, no routing between
// them): each side gets its RTP from the box's address on its own
// interface, in both directions.
func TestTwoInterfacesInNamespaces(t *testing.T) {
	topo := netnstest.New(t) // skips when not root
	topo.Veth("box", "lan0", "pa", "eth0")
	topo.Veth("box", "voice0", "pb", "eth0")
	topo.Addr("box", "lan0", "198.18.10.1/24")
	topo.Addr("box", "voice0", "198.18.20.1/24")
	topo.Addr("pa", "eth0", "198.18.10.2/24")
	topo.Addr("pb", "eth0", "198.18.20.2/24")
	for _, l := range [][2]string{{"box", "lan0"}, {"box", "voice0"}, {"pa", "eth0"}, {"pb", "eth0"}} {
		topo.Up(l[0], l[1])
	}
	box, nsA, nsB := topo.Handle("box"), topo.Handle("pa"), topo.Handle("pb")
	lan, voice := netip.MustParseAddr("198.18.10.1"), netip.MustParseAddr("198.18.20.1")

	r := newRelay(t, Config{})
	var pa, pb *phone
	inNS(t, nsA, func() { pa = newPhone(t, netip.MustParseAddr("198.18.10.2")) })
	inNS(t, nsB, func() { pb = newPhone(t, netip.MustParseAddr("198.18.20.2")) })
	s, err := r.NewSession(SessionConfig{ID: "netns", LocalA: lan, LocalB: voice})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var toB, toA []byte
	inNS(t, box, func() { // the relay binds its ports in the box namespace
		if toB, err = s.Offer(A, pa.sdp(1, []string{"0 PCMU"})); err != nil {
			t.Fatal(err)
		}
		if toA, err = s.Answer(B, pb.sdp(1, []string{"8 PCMA"})); err != nil {
			t.Fatal(err)
		}
	})
	boxForA, boxForB := addrOf(mediaOf(t, toA)), addrOf(mediaOf(t, toB))
	if boxForA.Addr() != lan || boxForB.Addr() != voice {
		t.Fatalf("SDP announces %v to A and %v to B", boxForA, boxForB)
	}
	for i := range 3 {
		pa.send(boxForA, 0, make([]byte, 160))
		got := pb.recv()
		if got.from != boxForB || got.pt != 8 {
			t.Errorf("packet %d at B: from %v pt %d, want from %v pt 8", i, got.from, got.pt, boxForB)
		}
		pb.send(boxForB, 8, make([]byte, 160))
		got = pa.recv()
		if got.from != boxForA || got.pt != 0 {
			t.Errorf("packet %d at A: from %v pt %d, want from %v pt 0", i, got.from, got.pt, boxForA)
		}
	}
}
