// Package hqtrunk is the box's trunk to HQ: the primary and backup pools
// of HQ servers (RFC 3263 or static targets), their health (each call's
// outcome and an OPTIONS probe per target), the order a call tries them
// in, the candidates of upstream registration, and TLS to HQ (the box
// dials and verifies HQ's servers by name itself, and hands the
// connections to sipgo).
//
// One Trunk is built per hq section of the document (Next keeps it, with
// its DNS cache and health, while the section is unchanged); the
// gateway's Server owns the Prober that runs its probes and the Dialer
// that opens its TLS connections. The package knows nothing of the
// Server, the dial plan or the mode: probe verdicts go out as Events for
// the mode logic to weigh.
package hqtrunk
