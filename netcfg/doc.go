// Package netcfg will be the only package that talks netlink: link,
// address and route snapshots, their diff, and a typed event stream
// (DESIGN.md §2). It is empty until the survivable-mode issue.
package netcfg
