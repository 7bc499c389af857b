package health

import (
	"math/rand/v2"
	"time"
)

// Defaults for the zero fields of Config.
const (
	DefaultDownAfter = 3
	DefaultUpAfter   = 3
	DefaultBlockFor  = 30 * time.Second
	DefaultInterval  = time.Second
	// maxDefaultTimeout caps the derived probe timeout (Interval/2).
	maxDefaultTimeout = 2 * time.Second
	// subscriberBuffer is the capacity of each Subscribe channel.
	subscriberBuffer = 64
)

// Config tunes a Tracker and its Prober. Zero fields mean defaults.
type Config struct {
	// DownAfter consecutive failed probes take an up target down (default 3).
	DownAfter int
	// UpAfter consecutive good probes (or traffic successes) bring a down
	// target up again (default 3).
	UpAfter int
	// BlockFor is how long a traffic Failure keeps a target out of Pick
	// (default 30 s). When it expires the target is half-open.
	BlockFor time.Duration
	// Interval between two probes of the same target (default 1 s).
	Interval time.Duration
	// Timeout of one probe (default Interval/2, at most 2 s).
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Rand picks the single target tried when none is eligible (default:
	// a PCG seeded at random). The Tracker serialises its use.
	Rand *rand.Rand
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.DownAfter <= 0 {
		c.DownAfter = DefaultDownAfter
	}
	if c.UpAfter <= 0 {
		c.UpAfter = DefaultUpAfter
	}
	if c.BlockFor <= 0 {
		c.BlockFor = DefaultBlockFor
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = min(c.Interval/2, maxDefaultTimeout)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return c
}
