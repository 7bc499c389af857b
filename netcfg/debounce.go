package netcfg

import "time"

// Debounce turns a burst of hints into one wake-up: the first Hint starts
// a cool-down of Delay, hints during it are covered by the same wake-up,
// and C is ready once when it ends. The Watcher uses it for netlink
// messages (a short Delay: sub-second WAN detection) and media/msr for
// interface events (longer: one re-registration per burst).
//
// A Debounce belongs to the goroutine that selects on C; it has no lock.
// The zero value with a Delay set is ready to use.
type Debounce struct {
	Delay time.Duration
	c     <-chan time.Time
}

// Hint asks for a wake-up Delay from now unless one is pending already.
func (d *Debounce) Hint() {
	if d.c == nil {
		d.c = time.After(d.Delay)
	}
}

// C is ready when the cool-down of the first pending hint has ended; nil
// (never ready in a select) when no hint is pending. After receiving from
// it, call Fired.
func (d *Debounce) C() <-chan time.Time { return d.c }

// Fired marks the wake-up taken, so that the next Hint starts a new
// cool-down.
func (d *Debounce) Fired() { d.c = nil }
