// Package overload decides when the box sheds new calls: past the knee a
// B2BUA must degrade gracefully, answering 503 early and keeping the calls
// it admitted, instead of collapsing under its callers' retransmissions.
//
// The signal is the queueing delay of admitted INVITEs (from the fast
// path's decision to the handler's start), near zero while the CPU keeps
// up whatever the rate. The rule is CoDel's (RFC 8289) applied to call
// setups: when the smallest delay of an interval (100 ms) is above the
// target (50 ms: a tenth of T1), the queue never drained in it and the
// interval was overloaded. The UDP sockets' sojourn time (the kernel's
// receive timestamps: the queue before the read) counts the same way on
// its own, with a 200 ms target (the reader works through batches of
// datagrams, so a slow box sees longer sojourns without a real queue).
//
// What an overloaded interval does is the admission rate's business, as
// with TCP's congestion window: the next interval admits at most half of
// what the last one admitted, and every new call over that quota gets a
// stateless 503 with Retry-After. A cut holds 300 ms (it shows in the
// delays only once the queue it found has drained), then may cut again;
// an interval that was not overloaded and used half its quota raises it
// by an eighth; five calm intervals, or a second of silence, lift it.
//
// A pause is not demand: a pause of the whole process (a collection, CPU
// quota throttling) leaves one interval with few admissions and a long
// smallest delay. When the first overloaded interval after a time without
// a quota admitted less than half the pace (the setups the box finished
// per interval lately), the quota starts at three quarters of the pace
// instead of half of almost nothing.
//
// Memory is the second reason to shed: while the live heap is over half
// of the process's memory limit (debug.SetMemoryLimit; 64 MiB without
// one), new calls are shed the same way; it falls as finished
// transactions expire.
//
// Requests of admitted calls are never shed: the calls the box took, it
// keeps. Neither target is configurable: they describe the box's CPU, not
// the site. The figures behind each constant (the knee, the flood, the
// pause, the memory threshold) are in bench/RESULTS.md (its overload
// sections).
package overload
