// Package dialplan makes the call-routing decision of the box: given a
// dialled number and the current mode (normal, survivable or standalone), it
// says where the call goes (local, hq or pstn), which number is sent there,
// which rule decided it, and why, as one human-readable line. It also maps a
// DID called from the PSTN to a local extension.
//
// # What it decides
//
// Outbound calls (Plan.Outbound), in this order:
//
//  1. An emergency number (exact match against Config.Emergency) goes to the
//     PSTN unchanged, in every mode, before any rule is tried.
//  2. Otherwise the first rule, in order, whose regexp matches the dialled
//     number wins. The regexp is used exactly as written (the documents
//     anchor it with ^…$; nothing is added). No later rule is tried, even if
//     the winner cannot route.
//  3. The winner's action depends on the mode:
//     - normal: the rule's own route, strip and prepend;
//     - survivable: the rule's survivable alternative if it has one. A rule
//     (or alternative) that routes to hq goes instead to the PSTN with
//     HQPSTNPrefix prepended to the rule's translated number
//     ("hq unreachable: pstn_prefix fallback"); with no prefix it cannot
//     route;
//     - standalone: hq does not exist. A rule routing to hq uses its
//     survivable alternative if it has one, otherwise it cannot route;
//     rules routing elsewhere use their own action.
//  4. Strip removes that many leading characters of the dialled number, then
//     Prepend is added. A strip that removes the whole number means the
//     rule cannot route.
//
// "Cannot route" is reported as ok == false with a Decision whose Explain
// says why; the B2BUA answers 404/484.
//
// Inbound calls (Plan.InboundDID): rules are tried in order; a rule whose
// regexp matches the DID expands its To template ($1, ${name}) against that
// match; the first rule yielding a known extension wins, and one yielding an
// unknown extension falls through to the next rule. This is the semantics
// appliance/config's validator checks documents against.
//
// # What it does not do
//
// No SIP, no I/O, no health checking and no clock: the mode is an input,
// decided by the mode machine (package mode). It does not validate the whole
// document (appliance/config does) and imports nothing of this repository;
// the appliance translates the stored document into Config.
//
// A Plan is compiled once (Compile) and is immutable and safe for
// concurrent use. Regexps are compiled and explanation texts prepared in
// Compile, so a routed call costs the regexp matches plus at most two small
// string allocations (the translated number and the explanation).
package dialplan
