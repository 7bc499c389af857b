package b2bua

import (
	"slices"
	"time"

	"github.com/outpost/outpost/gateway/health"
)

// Failover is how one route's targets (the HQ pool's, the PSTN
// gateways') are tried one after another: the client failover limits of
// the softswitch the route leads to. The zero value is the rule of
// health.Retryable over every target with Config.AttemptTimeout each.
type Failover struct {
	// AttemptTimeout bounds the wait for the first response from one
	// target; 0 = Config.AttemptTimeout.
	AttemptTimeout time.Duration
	// MaxTargets is how many of the route's targets one call tries (the
	// targets of a redirect not counted); 0 = all.
	MaxTargets int
	// Retry5xx are the 5xx statuses that move on to the next target
	// besides 503 and 504 (health.Retryable), e.g. 500 and 502 for a
	// softswitch that answers an overloaded node with them. A status
	// listed here also counts against a PSTN gateway's health.
	Retry5xx []int
}

// retryable is health.Retryable widened by Retry5xx.
func (f *Failover) retryable(status int, err error) bool {
	return health.Retryable(status, err) || f.retries(status)
}

// retries reports whether status is one of Retry5xx.
func (f *Failover) retries(status int) bool {
	return status >= 500 && status <= 599 && slices.Contains(f.Retry5xx, status)
}

// limit applies MaxTargets to a route's targets and marks each with f.
func (f *Failover) limit(ts []target) []target {
	if f.MaxTargets > 0 && len(ts) > f.MaxTargets {
		ts = ts[:f.MaxTargets]
	}
	for i := range ts {
		ts[i].failover = f
	}
	return ts
}

// attemptTimeout is f's AttemptTimeout, else def.
func (f *Failover) attemptTimeout(def time.Duration) time.Duration {
	if f != nil && f.AttemptTimeout > 0 {
		return f.AttemptTimeout
	}
	return def
}
