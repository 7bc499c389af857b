package health

import (
	"context"
	"errors"
)

// ErrNoResponse is what a transaction layer returns (or wraps) when a
// request got no final response at all: transport error, Timer B/F expiry.
// Retryable and ClassifyForHealth recognise it with errors.Is.
var ErrNoResponse = errors.New("gateway/health: no response")

// Outcome is what one real request told us about its target.
type Outcome int

const (
	// Unknown carries no evidence (e.g. our own caller cancelled);
	// Observe ignores it. It is the zero value on purpose.
	Unknown Outcome = iota
	// Success: the target answered (any final response below 500, or a 6xx).
	Success
	// Failure: transport error, timeout, or a 5xx.
	Failure
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	default:
		return "unknown"
	}
}

// isFinal reports whether status is a final SIP response (RFC 3261 §7.2:
// 2xx-6xx). 0 and 1xx mean "no final response".
func isFinal(status int) bool { return status >= 200 }

// cancelledByUs reports whether err is our own cancellation rather than the
// target's silence: a caller that hung up is no reason to try another
// target, nor evidence against this one.
func cancelledByUs(err error) bool {
	return errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// Retryable is the failover rule (docs/design.md §1): an INVITE moves on to the
// next target only after 408, 503, 504 or no final response at all
// (status 0 or 1xx: a transport error, a timeout such as
// context.DeadlineExceeded, ErrNoResponse, or any other error). Every other
// final response — 404, 480, 486, 500, 603, 2xx… — is the answer and is
// never retried. A final status decides on its own even when err is set.
//
// One deliberate exception: context.Canceled without a final response is
// not retryable, because it means our side gave up (the caller hung up).
func Retryable(status int, err error) bool {
	if isFinal(status) {
		switch status {
		case 408, 503, 504: // Request Timeout, Service Unavailable, Server Time-out
			return true
		}
		return false
	}
	return !cancelledByUs(err)
}

// ClassifyForHealth turns the result of one real request into evidence for
// Observe: a 5xx final response or no response at all (transport error,
// timeout, status 0) is a Failure; any other answer, 1xx-4xx and 6xx
// included, is a Success because the target answered. Our own cancellation
// without a final response is Unknown.
func ClassifyForHealth(status int, err error) Outcome {
	switch {
	case status >= 500 && status <= 599:
		return Failure
	case status >= 100:
		return Success
	case cancelledByUs(err):
		return Unknown
	default:
		return Failure
	}
}

// ClassifyAttempt turns the outcome of one call attempt (an INVITE to a
// PSTN gateway) into evidence by the retry rule itself: what Retryable
// moves on from (408, 503, 504, no final response: a transport error or a
// timeout) is a Failure and blocks the target; any other final answer (a
// 404, a 486, a 500 about one number) is a Success, because the target
// answered for itself. Our own cancellation without a final response is
// Unknown.
func ClassifyAttempt(status int, err error) Outcome {
	switch {
	case isFinal(status) && Retryable(status, err):
		return Failure
	case isFinal(status):
		return Success
	case cancelledByUs(err):
		return Unknown
	}
	return Failure
}
