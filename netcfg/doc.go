// Package netcfg is the only package of outpostd that talks netlink. It
// reads the kernel's links, addresses and routes as one State snapshot,
// computes the difference between two snapshots as a typed, ordered list
// of Events (Diff), and runs a Watcher that keeps the newest snapshot and
// fans the differences out to subscribers.
//
// # Design: snapshot + diff
//
// Netlink messages are treated as hints, never as state (the design of
// tailscale's net/netmon). Whenever the kernel reports anything, the
// Watcher waits a short cool-down so that a burst collapses into one
// wake-up (a one-slot hint channel), re-reads the whole state, diffs it
// against the last snapshot and publishes the delta. A lost, duplicated
// or reordered message therefore cannot corrupt what consumers see: the
// next wake-up repairs it. When the subscription itself dies (a full
// socket receive buffer kills it), the Watcher re-reads the state at once
// and re-subscribes after a back-off.
//
// The kernel hides behind the two-method Source interface
// (Snapshot, Subscribe), so Diff and the Watcher are tested without
// netlink: Diff by tables, the Watcher with a fake Source under
// testing/synctest. NetlinkSource is the real Source, optionally bound to
// a network namespace; netcfg/netnstest builds namespace topologies for
// tests that need a real kernel.
//
// VLAN sub-interfaces, macvlans, veths and physical ports are all
// ordinary links: Kind, VLANID and Parent describe them, nothing treats
// them specially.
//
// # What it does not do
//
// netcfg has no policy. It does not decide which interface is the WAN,
// whether a link counts as usable, when to declare survivable mode or
// which interfaces to announce; consumers (the mode machine, the MSR
// registrations, the media relay) do, from the events and snapshots. It
// never changes the kernel's configuration, and it imports no other
// package of this module.
package netcfg
