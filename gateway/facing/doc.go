// Package facing decides which of the box's local SIP addresses faces a
// peer: the one a request to that peer should leave from, and the one to
// announce to it (Via, Contact), so that the peer's answers and calls come
// back on an interface where they arrive. On a box with a LAN and a WAN
// listener this keeps requests to HQ on the WAN address.
//
// The functions are pure over addresses: the kernel's routing table and
// the appliance's choice among interfaces come in as functions (Route,
// Chooser), so the decisions are table-tested. It does not bind or own
// sockets (gateway/listen) and does not know which peers exist.
package facing
