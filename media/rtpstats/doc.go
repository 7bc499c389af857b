// Package rtpstats keeps the receive statistics of one RTP stream the way
// RFC 3550 Appendix A describes them: packets and bytes, the extended
// highest sequence number with wrap-around and restart detection (A.1),
// expected and lost packets (A.3), and the interarrival jitter (A.8),
// reported in milliseconds for the stream's clock rate.
//
// Design decisions:
//
//   - A Receiver is a plain value updated by one goroutine (the relay's
//     reader of that leg); it does no locking and never allocates, so the
//     relay can call Update for every packet. Callers that read the
//     figures from another goroutine synchronise themselves.
//   - Arrival times are given by the caller in nanoseconds of any
//     monotonic clock, which keeps the package free of time.Now and makes
//     it deterministic under test.
//   - A.1 treats a jump of more than MaxDropout packets as a probable
//     restart of the sender: the packet is held back, and when the next
//     one follows it the sequence state is re-initialised. Unlike A.1 a
//     restart does not lose the history: expected and received packets of
//     the previous run are folded into the totals, so Lost stays a
//     call-long figure even when a re-INVITE changes the source. Reset
//     does the same for an SSRC change the caller sees.
//   - Lost may be negative, as RFC 3550 §6.4.1 allows, when duplicates
//     arrive; callers that show it may clamp it.
//   - The jitter estimate is computed in floating point nanoseconds (same
//     formula as A.8): the RFC's integer form in clock units reads 0.94 ms
//     for a true 1 ms at 8 kHz.
//   - Probation (MIN_SEQUENTIAL) is left out: the relay has already
//     latched the source, so the first packet is trusted.
//
// Update takes the sequence number and timestamp as numbers: the caller
// parses the packet (media/relay with github.com/pion/rtp, into a header
// it reuses), so there is one RTP parser and this package needs none.
//
// The package imports nothing of this module.
package rtpstats
