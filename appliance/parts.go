package appliance

import (
	"context"
	"errors"
	"fmt"
)

// A part is one piece of the running box that a document configures: the
// gateway (SIP), media (the RTP relay), msr (media resources), management
// (the HTTPS API), status (the local status page) and mode (the mode
// machine). Applying a document is two phases over every part, so that a
// push either changes all of them or none:
//
//   - prepare does all the fallible work for the new configuration —
//     binding new sockets, parsing certificates, building trunks, checking
//     against the network — without changing what runs;
//   - then, once every part has prepared and the version is stored, each
//     change is committed, which cannot fail; or, if any part or the store
//     failed, every prepared change is aborted, releasing what it took.
type part interface {
	name() string
	prepare(ctx context.Context, next *partConfigs) (change, error)
}

// change is a prepared reconfiguration of one part.
type change interface {
	Commit()
	Abort()
}

// partError is a refusal by one part; the API shows it as "applying to
// PART: reason".
type partError struct {
	part string
	err  error
}

func (e *partError) Error() string { return "applying to " + e.part + ": " + e.err.Error() }
func (e *partError) Unwrap() error { return e.err }

// prepared is the changes of one apply, in the parts' order.
type prepared []change

// prepareAll prepares every part in order. On the first refusal it aborts
// what the earlier parts prepared and returns the refusal, naming the part.
func prepareAll(ctx context.Context, parts []part, next *partConfigs) (prepared, error) {
	var out prepared
	for _, p := range parts {
		c, err := p.prepare(ctx, next)
		if err != nil {
			out.abort()
			return nil, &partError{part: p.name(), err: err}
		}
		out = append(out, c)
	}
	return out, nil
}

func (ps prepared) commit() {
	for _, c := range ps {
		c.Commit()
	}
}

// abort releases the prepared changes, the last prepared first.
func (ps prepared) abort() {
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].Abort()
	}
}

// funcs is a change made of two functions; a nil one does nothing.
type funcs struct{ commit, abort func() }

func (f funcs) Commit() {
	if f.commit != nil {
		f.commit()
	}
}

func (f funcs) Abort() {
	if f.abort != nil {
		f.abort()
	}
}

// errStopping refuses applies once the appliance has begun to stop.
var errStopping = errors.New("appliance: stopping")

// partFailed wraps a part's error at start-up.
func partFailed(name string, err error) error { return fmt.Errorf("appliance: %s: %w", name, err) }
