package registrar

import (
	"time"

	"github.com/outpost/outpost/gateway/digest"
)

// User is one local account. Passwords never reach the registrar: only the
// digest HA1 values H(user:realm:password) for each algorithm.
type User struct {
	Extension string
	HA1MD5    string
	HA1SHA256 string
}

// Config is the registrar's part of the document. Zero fields mean defaults.
type Config struct {
	Realm      string
	Algorithms []digest.Algorithm // challenge order; empty = MD5 alone (see gateway/digest)
	MinExpires int                // seconds; 0 = 60
	MaxExpires int                // seconds; 0 = 3600
	Users      []User

	// AuthFailLimit is the number of failed authentications per source IP
	// and user name per minute (and, separately, per source IP for names
	// that are no user) after which further failures of that key are
	// answered 503 with Retry-After instead of 403 until its budget refills.
	// Credentials that verify are accepted regardless (see the package
	// doc). 0 = 10.
	AuthFailLimit int
	// StormRate is the number of new registration attempts (REGISTER without
	// credentials) admitted per second; above it the registrar answers 503
	// with Retry-After. 0 = 2000; negative = no limit.
	StormRate int
	// RetryAfter is the base of the Retry-After given by the storm guard; a
	// random jitter of up to the same amount is added. 0 = 5 s.
	RetryAfter time.Duration
	// PersistInterval is how often changed bindings are written behind to
	// the Persister. 0 = 1 s: a power cut loses at most the last second of
	// registrations (those phones register again), and a burst of refreshes
	// costs one transaction per second instead of five.
	PersistInterval time.Duration
	// MaxContacts bounds the bindings of one AOR. 0 = 16.
	MaxContacts int
	// MSR, when set, accepts media servers' REGISTERs (see MSRAccount).
	MSR *MSRAccount
	// AllowNoQop accepts digest responses without qop (RFC 2069
	// compatibility: no cnonce, no nonce count, so a captured Authorization
	// can be replayed while its nonce lives). Off by default: such a
	// response is a failed authentication, answered with a fresh challenge.
	AllowNoQop bool
	// FlowTimer is the keep-alive interval, in seconds, given in the
	// Flow-Timer header of a 200 to an RFC 5626 outbound registration
	// (the phone sends a CRLF keep-alive at least that often). 0 = 120.
	FlowTimer int
}

const defaultExpires = 3600

func (c Config) minExpires() int { return orDefault(c.MinExpires, 60) }
func (c Config) maxExpires() int { return orDefault(c.MaxExpires, 3600) }
func (c Config) flowTimer() int  { return orDefault(c.FlowTimer, defaultFlowTimer) }

// defaultFlowTimer is RFC 5626 §4.4.1's keep-alive interval for
// connection-oriented flows (95 to 120 s recommended).
const defaultFlowTimer = 120

func (c Config) authFailLimit() int {
	return orDefault(c.AuthFailLimit, 10)
}
func (c Config) stormRate() int { return orDefault(c.StormRate, 2000) }
func (c Config) retryAfter() time.Duration {
	if c.RetryAfter <= 0 {
		return 5 * time.Second
	}
	return c.RetryAfter
}
func (c Config) persistInterval() time.Duration {
	if c.PersistInterval <= 0 {
		return time.Second
	}
	return c.PersistInterval
}
func (c Config) maxContacts() int { return orDefault(c.MaxContacts, 16) }
func (c Config) algorithms() []digest.Algorithm {
	if len(c.Algorithms) == 0 {
		return []digest.Algorithm{digest.MD5}
	}
	return c.Algorithms
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
