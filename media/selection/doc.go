// Package selection chooses the media resource that anchors a call leg, as
// the ECSS-10 core does (docs/design.md §1 "Media resource selection").
//
// A media resource is one announced interface of an MSR: this box's own
// interfaces, or those of other boxes whose MSR UAs register to this box.
// Table holds the registered ones (Upsert from a parsed MSR REGISTER,
// Remove, Expire, Snapshot); Select picks one for a leg, and Table.Select
// takes the box's own resources beside the table's.
//
// # The selection, step by step (Select)
//
//  1. Keep the registered, administratively active, unexpired entries of
//     the leg's zone (exact string match; "" matches only "").
//  2. If the other leg already has an MSR (Request.MSRID) and it is among
//     them, narrow to that MSR's entries.
//  3. Rank by the site-distance matrix, row = the leg's site, column = the
//     entry's site. A missing cell is infinity: the pair is forbidden and
//     the entry is dropped, whatever else happens. 0 is an ordinary
//     distance ("equal"). Keep only the entries at the smallest distance.
//     Decision: a Policy with no matrix at all (nil or empty) ranks
//     nothing and forbids nothing; otherwise an unconfigured box could
//     never anchor media.
//  4. De-duplicate by MSR name, so that an MSR with three interfaces does
//     not weigh three times. Decision: the entry kept for an MSR is the
//     one with the smallest interface name (deterministic; the caller
//     does not say which interface it wants).
//  5. Pick at random, weighted by (100 − load%) × performance coefficient.
//     The candidates are laid out in MSR-name order on [0, total): each
//     owns an interval as long as its weight (Intervals shows them). The
//     weights are computed in integer thousandths of a coefficient, so
//     intervals are exact. If every weight is 0 (everything fully loaded)
//     the pick is uniform rather than "nothing".
//
// Before step 3, the calling leg's MSR (Request.PreferMSR) is taken for the
// called leg if it survived step 1 (its zone allows it) and its site is not
// forbidden; the random pick is then skipped.
//
// The worked example of docs/design.md §1 (loads 55/40/60, coefficients
// 1.0/0.9/1.2) gives weights 45, 54 and 48, i.e. intervals 0–45, 45–99
// and 99–147: the ECSS-10 text prints 56 for (100 − 40) × 0.9, and the
// tests pin the formula's result, not the slip.
//
// # What it does not do
//
// No SIP parsing beyond the values of the MSR headers (ParseRegister takes
// a header map the registrar extracted), no authentication, no clock of
// its own beyond Table's injectable one, no I/O. It imports nothing of
// this module.
package selection
