package msr

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/outpost/outpost/netcfg"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// inNS runs f on a thread switched into ns; sockets f opens live there.
// If the thread cannot be switched back it stays locked and dies with
// the goroutine.
func inNS(ns netns.NsHandle, f func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("restore namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// nsSockets opens the agent's sockets inside a namespace.
type nsSockets struct{ ns netns.NsHandle }

func (s nsSockets) ListenPacket(ctx context.Context, network, addr string) (c net.PacketConn, err error) {
	err = inNS(s.ns, func() error {
		c, err = (&net.ListenConfig{}).ListenPacket(ctx, network, addr)
		return err
	})
	return c, err
}

func (s nsSockets) Listen(ctx context.Context, network, addr string) (l net.Listener, err error) {
	err = inNS(s.ns, func() error {
		l, err = (&net.ListenConfig{}).Listen(ctx, network, addr)
		return err
	})
	return l, err
}

func (s nsSockets) listenPacket(network, addr string) (net.PacketConn, error) {
	return s.ListenPacket(context.Background(), network, addr)
}

// nsBox is the namespace topology of the real-kernel tests:
//
//	ns box: wan0 (198.18.0.1/24, service) ── hq0 in ns hq (198.18.0.2, registrar)
//	        lan0 (198.18.1.1/24) ── lan0p in ns peer
//	        voice0: macvlan on lan0 (198.18.2.1/24), standing in for a VLAN
type nsBox struct {
	topo *netnstest.Topology
	box  netns.NsHandle
	hq   netns.NsHandle
	reg  *registrar
	w    *netcfg.Watcher
	ch   <-chan []netcfg.Event
}

func newNSBox(t testing.TB, watcherDebounce time.Duration) *nsBox {
	t.Helper()
	topo := netnstest.New(t) // skips with a reason when not root or without ip(8)
	b := &nsBox{topo: topo, box: topo.Handle("box"), hq: topo.Handle("hq")}
	topo.NS("peer")
	topo.Veth("box", "wan0", "hq", "hq0")
	topo.Addr("box", "wan0", "198.18.0.1/24")
	topo.Addr("hq", "hq0", "198.18.0.2/24")
	topo.Up("hq", "hq0")
	topo.Up("box", "wan0")
	topo.Veth("box", "lan0", "peer", "lan0p")
	topo.Addr("box", "lan0", "198.18.1.1/24")
	topo.Up("peer", "lan0p")
	topo.Up("box", "lan0")
	topo.IP("box", "link", "add", "link", "lan0", "name", "voice0", "type", "macvlan", "mode", "bridge")
	topo.Addr("box", "voice0", "198.18.2.1/24")
	topo.Up("box", "voice0")

	b.reg = newRegistrar(t, nsSockets{b.hq}.listenPacket, "198.18.0.2")
	b.w = netcfg.NewWatcher(netcfg.NetlinkSource(b.box), netcfg.Config{Debounce: watcherDebounce}, nil)
	ch, unsub := b.w.Subscribe(64)
	b.ch = ch
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.w.Run(ctx) }()
	// Registered after the handles: stops before they close.
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("watcher: %v", err)
		}
		unsub()
	})
	return b
}
