package rtpstats

import "math"

// RFC 3550 A.1 constants.
const (
	// MaxDropout is the largest forward jump still taken as loss.
	MaxDropout = 3000
	// MaxMisorder is the largest backward jump taken as a late packet.
	MaxMisorder = 100
	seqMod      = 1 << 16
)

// Stats is a snapshot of one stream's receive statistics.
type Stats struct {
	Packets  uint64  // packets given to Update
	Bytes    uint64  // their sizes summed
	Expected uint64  // RFC 3550 A.3: extended highest - base + 1, summed over restarts
	Lost     int64   // Expected - received in sequence space (negative with duplicates)
	Late     uint64  // packets older than the highest sequence seen (reordered or duplicate)
	Restarts uint64  // sequence restarts detected (large jumps, Reset)
	Jitter   float64 // RFC 3550 A.8 interarrival jitter, in milliseconds
}

// Receiver tracks one RTP stream. The zero value is ready; SetClockRate
// must be called before jitter means anything (default 8000 Hz).
type Receiver struct {
	clockRate uint32

	started bool
	maxSeq  uint16 // highest sequence number seen
	cycles  uint32 // wrap count << 16 (RFC 3550 A.1)
	baseSeq uint32 // first extended sequence number of the current run
	badSeq  uint32 // sequence expected after a suspected restart, or > 0xFFFF
	recv    uint64 // packets counted in the current run

	// Folded history of previous runs (restarts and Resets).
	prevExpected uint64
	prevRecv     uint64

	packets, bytes, late, restarts uint64

	// Jitter state (A.8): arrival and RTP timestamp of the previous
	// packet, and the estimate in nanoseconds. The estimate is kept in
	// floating point on the nanosecond scale rather than in the RFC's
	// integer clock units, whose 125 µs steps at 8 kHz bias it low.
	haveTransit bool
	prevArrival int64
	prevTS      uint32
	jitterNs    float64
}

// SetClockRate sets the RTP clock rate in Hz (8000 for G.711).
func (r *Receiver) SetClockRate(hz int) {
	if hz > 0 {
		r.clockRate = uint32(hz)
	}
}

func (r *Receiver) rate() uint32 {
	if r.clockRate == 0 {
		return 8000
	}
	return r.clockRate
}

// Reset starts a new sequence run (a new SSRC), keeping the totals. The
// jitter estimate is kept too; only the transit reference restarts.
func (r *Receiver) Reset() {
	if r.started {
		r.fold()
		r.restarts++
	}
	r.started = false
	r.haveTransit = false
}

// fold moves the current run's figures into the history.
func (r *Receiver) fold() {
	r.prevExpected += r.expectedRun()
	r.prevRecv += r.recv
	r.recv = 0
}

func (r *Receiver) initSeq(seq uint16) {
	r.baseSeq = uint32(seq)
	r.maxSeq = seq
	r.badSeq = seqMod + 1 // so seq == badSeq is false
	r.cycles = 0
	r.recv = 0
}

// Update accounts one packet of size bytes with sequence number seq and
// RTP timestamp ts that arrived at arrivalNs (nanoseconds, monotonic). It
// reports whether the packet was taken into the sequence statistics
// (false only for the first packet after a suspected restart, which is
// counted once the restart is confirmed).
func (r *Receiver) Update(seq uint16, ts uint32, arrivalNs int64, size int) bool {
	r.packets++
	r.bytes += uint64(size)
	r.updateJitter(ts, arrivalNs)
	if !r.started {
		r.started = true
		r.initSeq(seq)
		r.recv = 1
		return true
	}
	// RFC 3550 A.1 update_seq, with the probation part left out.
	udelta := seq - r.maxSeq
	switch {
	case udelta == 0:
		r.late++ // duplicate of the highest packet
	case udelta < MaxDropout:
		// In order, with a permissible gap.
		if seq < r.maxSeq {
			r.cycles += seqMod // sequence number wrapped
		}
		r.maxSeq = seq
	case udelta <= seqMod-MaxMisorder:
		// A very large jump: a restart if the next packet follows it.
		if uint32(seq) == r.badSeq {
			r.fold()
			r.restarts++
			r.initSeq(seq)
			r.haveTransit = false
			r.updateJitter(ts, arrivalNs)
		} else {
			r.badSeq = (uint32(seq) + 1) & (seqMod - 1)
			return false
		}
	default:
		// Duplicate or reordered packet (within MaxMisorder behind).
		r.late++
	}
	r.recv++
	return true
}

// updateJitter applies RFC 3550 A.8: D = (Rj - Ri) - (Sj - Si),
// J += (|D| - J) / 16.
func (r *Receiver) updateJitter(ts uint32, arrivalNs int64) {
	if r.haveTransit {
		// The RTP timestamp is 32-bit: its difference is taken modulo
		// 2^32 as a signed value, so a wrap is not a jump.
		dts := int64(int32(ts - r.prevTS))
		d := float64(arrivalNs-r.prevArrival) - float64(dts)*1e9/float64(r.rate())
		r.jitterNs += (math.Abs(d) - r.jitterNs) / 16
	}
	r.prevArrival, r.prevTS = arrivalNs, ts
	r.haveTransit = true
}

func (r *Receiver) expectedRun() uint64 {
	if !r.started {
		return 0
	}
	ext := r.cycles + uint32(r.maxSeq)
	return uint64(ext - r.baseSeq + 1)
}

// Stats returns the current figures.
func (r *Receiver) Stats() Stats {
	expected := r.prevExpected + r.expectedRun()
	received := r.prevRecv + r.recv
	return Stats{
		Packets:  r.packets,
		Bytes:    r.bytes,
		Expected: expected,
		Lost:     int64(expected) - int64(received),
		Late:     r.late,
		Restarts: r.restarts,
		Jitter:   r.jitterNs / 1e6,
	}
}
