package netcfg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetlinkSource returns the Source that reads the kernel over rtnetlink,
// in the network namespace ns (0 or netns.None() = the caller's current
// namespace). The handle must stay open while the Source is used.
func NetlinkSource(ns netns.NsHandle) Source {
	return &nlSource{ns: ns}
}

type nlSource struct {
	ns netns.NsHandle
}

func (s *nlSource) inNamespace() bool { return s.ns > 0 }

// snapshotAttempts bounds the retries of a dump the kernel interrupted
// (NLM_F_DUMP_INTR: the tables changed while being read).
const snapshotAttempts = 10

// Snapshot reads links, addresses and routes; a dump interrupted by a
// concurrent change (netlink.ErrDumpInterrupted) is read again.
func (s *nlSource) Snapshot(ctx context.Context) (State, error) {
	var err error
	for range snapshotAttempts {
		if err := ctx.Err(); err != nil {
			return State{}, err
		}
		var st State
		st, err = s.snapshotOnce()
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return State{}, err
		}
	}
	return State{}, fmt.Errorf("netcfg: snapshot: %w (%d attempts)", err, snapshotAttempts)
}

func (s *nlSource) handle() (*netlink.Handle, error) {
	if s.inNamespace() {
		return netlink.NewHandleAt(s.ns, unix.NETLINK_ROUTE)
	}
	return netlink.NewHandle(unix.NETLINK_ROUTE)
}

func (s *nlSource) snapshotOnce() (State, error) {
	h, err := s.handle()
	if err != nil {
		return State{}, fmt.Errorf("netcfg: netlink handle: %w", err)
	}
	defer h.Close()

	links, err := h.LinkList()
	if err != nil {
		return State{}, fmt.Errorf("netcfg: list links: %w", err)
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return State{}, fmt.Errorf("netcfg: list addresses: %w", err)
	}
	// Table RT_TABLE_UNSPEC with RT_FILTER_TABLE = every table.
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL,
		&netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return State{}, fmt.Errorf("netcfg: list routes: %w", err)
	}

	st := State{Links: make(map[int]Link, len(links))}
	for _, l := range links {
		cl := convertLink(l)
		st.Links[cl.Index] = cl
	}
	for _, a := range addrs {
		if ca, ok := convertAddr(a); ok {
			st.Addrs = append(st.Addrs, ca)
		}
	}
	for _, r := range routes {
		st.Routes = append(st.Routes, convertRoute(r)...)
	}
	st.Normalize()
	return st, nil
}

func convertLink(l netlink.Link) Link {
	a := l.Attrs()
	out := Link{
		Index:    a.Index,
		Name:     a.Name,
		Up:       a.Flags&net.FlagUp != 0,
		MTU:      a.MTU,
		Kind:     l.Type(),
		Loopback: a.Flags&net.FlagLoopback != 0,
	}
	if len(a.HardwareAddr) > 0 {
		out.HardwareAddr = a.HardwareAddr.String()
	}
	switch a.OperState {
	case netlink.OperUp:
		out.Carrier = true
	case netlink.OperUnknown:
		// Loopback, tun and some drivers never set an operstate.
		out.Carrier = out.Up && a.RawFlags&unix.IFF_LOWER_UP != 0
	}
	if v, ok := l.(*netlink.Vlan); ok {
		out.VLANID = v.VlanId
	}
	// IFLA_LINK of a veth is its peer, not a lower device; with
	// IFLA_LINK_NETNSID set the lower device is in another namespace.
	// Normalize drops a ParentIndex not found in the snapshot.
	if _, isVeth := l.(*netlink.Veth); !isVeth && a.NetNsID < 0 &&
		a.ParentIndex != 0 && a.ParentIndex != a.Index {
		out.ParentIndex = a.ParentIndex
	}
	return out
}

func convertAddr(a netlink.Addr) (Addr, bool) {
	if a.IPNet == nil {
		return Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return Addr{}, false
	}
	ones, _ := a.Mask.Size()
	return Addr{
		LinkIndex: a.LinkIndex,
		Prefix:    netip.PrefixFrom(ip.Unmap(), ones),
		Tentative: a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0,
	}, true
}

func convertRoute(r netlink.Route) []Route {
	if r.Type != unix.RTN_UNICAST || r.Table == unix.RT_TABLE_LOCAL {
		return nil
	}
	var dst netip.Prefix
	if r.Dst != nil {
		ip, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			return nil
		}
		ones, _ := r.Dst.Mask.Size()
		dst = netip.PrefixFrom(ip.Unmap(), ones)
	} else if r.Family == unix.AF_INET6 {
		dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	} else {
		dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	gw := func(ip net.IP) netip.Addr {
		a, _ := netip.AddrFromSlice(ip)
		return a.Unmap()
	}
	if len(r.MultiPath) > 0 {
		var out []Route
		for _, nh := range r.MultiPath {
			out = append(out, Route{LinkIndex: nh.LinkIndex, Dst: dst, Gateway: gw(nh.Gw), Table: r.Table})
		}
		return out
	}
	return []Route{{LinkIndex: r.LinkIndex, Dst: dst, Gateway: gw(r.Gw), Table: r.Table}}
}

// receiveBuffer is the requested socket receive buffer of each
// subscription (capped by net.core.rmem_max). An overrun still kills the
// subscription; the Watcher then re-reads and re-subscribes.
const receiveBuffer = 1 << 20

// Subscribe listens for link, address and route notifications and turns
// each into a hint. It returns nil when ctx ends and an error when any of
// the three subscriptions dies. It always drains the library's channels
// before returning: the library's reader goroutines block on them
// otherwise.
func (s *nlSource) Subscribe(ctx context.Context, hint chan<- struct{}) error {
	poke := func() {
		select {
		case hint <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	errc := make(chan error, 8)
	cb := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	var nsp *netns.NsHandle
	if s.inNamespace() {
		ns := s.ns
		nsp = &ns
	}
	var (
		lch chan netlink.LinkUpdate
		ach chan netlink.AddrUpdate
		rch chan netlink.RouteUpdate
	)
	stop := func() {
		close(done)
		// The error callback fires on shutdown too; the channels close
		// after it. Drain them so the readers can exit.
		if lch != nil {
			for range lch {
			}
		}
		if ach != nil {
			for range ach {
			}
		}
		if rch != nil {
			for range rch {
			}
		}
	}

	lch = make(chan netlink.LinkUpdate, 64)
	if err := netlink.LinkSubscribeWithOptions(lch, done, netlink.LinkSubscribeOptions{
		Namespace: nsp, ErrorCallback: cb, ReceiveBufferSize: receiveBuffer,
	}); err != nil {
		lch = nil
		stop()
		return fmt.Errorf("netcfg: subscribe links: %w", err)
	}
	ach = make(chan netlink.AddrUpdate, 64)
	if err := netlink.AddrSubscribeWithOptions(ach, done, netlink.AddrSubscribeOptions{
		Namespace: nsp, ErrorCallback: cb, ReceiveBufferSize: receiveBuffer,
	}); err != nil {
		ach = nil
		stop()
		return fmt.Errorf("netcfg: subscribe addresses: %w", err)
	}
	rch = make(chan netlink.RouteUpdate, 64)
	if err := netlink.RouteSubscribeWithOptions(rch, done, netlink.RouteSubscribeOptions{
		Namespace: nsp, ErrorCallback: cb, ReceiveBufferSize: receiveBuffer,
	}); err != nil {
		rch = nil
		stop()
		return fmt.Errorf("netcfg: subscribe routes: %w", err)
	}
	defer stop()

	// Changes made before the subscriptions existed are covered by a
	// re-read now.
	poke()

	var lastErr error
	dead := func(what string) error {
		if ctx.Err() != nil {
			return nil
		}
		// Give the callback's reason a chance to be reported.
		select {
		case err := <-errc:
			lastErr = err
		default:
		}
		if lastErr != nil {
			return fmt.Errorf("netcfg: %s subscription closed: %w", what, lastErr)
		}
		return fmt.Errorf("netcfg: %s subscription closed", what)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-lch:
			if !ok {
				lch = nil
				return dead("link")
			}
			poke()
		case _, ok := <-ach:
			if !ok {
				ach = nil
				return dead("address")
			}
			poke()
		case _, ok := <-rch:
			if !ok {
				rch = nil
				return dead("route")
			}
			poke()
		case err := <-errc:
			// Non-fatal reports (interrupted dump, an NLMSG_ERROR, a
			// message from a foreign sender) only mean "re-read"; a fatal
			// receive error is followed by the channel closing.
			lastErr = err
			poke()
		}
	}
}
