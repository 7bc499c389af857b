// Package api is the management API of outpostd (docs/design.md §4): JSON over
// HTTP, served on the local Unix admin socket (and, later, over mutual TLS
// for HQ). It holds the wire types, the HTTP handler over a Backend that the
// appliance implements, and the Client that outpostctl uses.
//
// It imports no SIP, SQLite or netlink code so that outpostctl stays small:
// the appliance converts its parts' state into the wire types here.
package api
