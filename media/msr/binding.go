package msr

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// unregisterTimeout bounds an unREGISTER (removal, shutdown, old contact).
// A lost unREGISTER costs little, the binding lapses at the registrar, but
// a re-appearing interface waits for it (see binding.after).
const unregisterTimeout = 4 * time.Second

// bindingKey identifies one registration: one UA (interface and AOR) at
// one server address.
type bindingKey struct {
	iface  string
	aor    string
	target netip.AddrPort
}

// regSpec is what the agent wants a binding to register. The binding
// adds what belongs to the registration itself (Call-ID, From tag, CSeq)
// and the load, read when each REGISTER is built.
type regSpec struct {
	snd        sender
	target     target
	iface      iface
	requestURI sip.Uri
	aor        sip.Uri
	contact    sip.Uri
	display    string
	headers    []header
	loadHeader string
	expires    time.Duration
	interval   time.Duration
	retry      time.Duration
	timeout    time.Duration
	auth       sipgo.DigestAuth
}

func (s regSpec) equal(o regSpec) bool {
	return s.snd == o.snd && s.target == o.target && s.iface == o.iface &&
		s.requestURI.String() == o.requestURI.String() && s.aor.String() == o.aor.String() &&
		s.contact.String() == o.contact.String() && s.display == o.display &&
		slices.Equal(s.headers, o.headers) && s.loadHeader == o.loadHeader &&
		s.expires == o.expires && s.interval == o.interval && s.retry == o.retry &&
		s.timeout == o.timeout && s.auth == o.auth
}

// binding is the goroutine that keeps one registration: REGISTER at once,
// refresh every interval, retry an unconfirmed one at the retry interval,
// re-REGISTER at once when the agent pushes a new spec (cancelling an
// attempt in flight), unREGISTER when removed.
type binding struct {
	key     bindingKey
	upd     chan regSpec  // one slot; the agent replaces a pending spec
	stop    chan struct{} // closed by remove
	done    chan struct{} // closed when the goroutine has exited
	after   <-chan struct{}
	load    func() int
	report  func(UAStatus, bool) // status; false = gone
	log     *slog.Logger
	callID  string
	fromTag string
	cseq    uint32

	// last is the spec last handed over (owned by the agent's loop).
	last regSpec

	// Set by remove before stop is closed, read after.
	silent   bool
	finalSnd sender
}

func newBinding(key bindingKey, after <-chan struct{}, load func() int, report func(UAStatus, bool), log *slog.Logger) *binding {
	return &binding{
		key:     key,
		upd:     make(chan regSpec, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		after:   after,
		load:    load,
		report:  report,
		log:     log,
		callID:  randHex(12),
		fromTag: randHex(8),
	}
}

// push hands a new spec to the binding if it differs from the last one;
// only the agent's loop calls it, so after draining a stale spec the slot
// is free.
func (b *binding) push(s regSpec) {
	if s.equal(b.last) {
		return
	}
	b.last = s
	select {
	case <-b.upd:
	default:
	}
	b.upd <- s
}

// remove ends the binding: it unREGISTERs through snd (the agent's current
// sender; nil or silent = no unREGISTER, the service address is gone) and
// exits. Only the agent's loop calls it, once.
func (b *binding) remove(snd sender, silent bool) {
	b.finalSnd, b.silent = snd, silent || snd == nil
	close(b.stop)
}

// outcome of one attempt.
type outcome int

const (
	answered outcome = iota
	superseded
	stopped
)

// run is the binding's goroutine. ctx is the agent's hard stop: when it
// ends, run returns without unREGISTER.
func (b *binding) run(ctx context.Context, spec regSpec) {
	defer close(b.done)
	st := UAStatus{
		Interface: spec.iface.Name, Address: spec.iface.Addr, Service: spec.iface.Service,
		URI: spec.aor.String(), Contact: spec.contact.String(),
		Server: spec.target.server, Target: spec.target.addr,
	}
	defer func() { b.report(st, false) }()
	if b.after != nil {
		// The previous binding with this key may still be sending its
		// unREGISTER; ours must not arrive before it.
		select {
		case <-b.after:
		case <-b.stop:
			return
		case <-ctx.Done():
			return
		}
	}
	st.NextRefresh = time.Now()
	b.report(st, true)
	var (
		sent       bool    // anything was sent: unREGISTER on removal
		registered sip.Uri // contact confirmed by the last 2xx ("" Host = none)
	)
loop:
	for {
		select {
		case s := <-b.upd:
			spec = s
		default:
		}
		st.Interface, st.Address, st.Service = spec.iface.Name, spec.iface.Addr, spec.iface.Service
		st.URI, st.Contact = spec.aor.String(), spec.contact.String()
		// The service address moved: drop the binding of the old contact
		// (sent from the new address; the registrar does not care).
		if registered.Host != "" && registered.String() != spec.contact.String() {
			old := spec
			old.contact = registered
			b.unregister(ctx, old)
			registered = sip.Uri{}
		}
		st.LastAttempt = time.Now()
		tried := spec.contact
		res, out, err := b.attempt(ctx, &spec, expirySeconds(spec.expires))
		sent = true
		if out != answered && mayHaveRegistered(res, err) {
			// The registrar may have taken a REGISTER we stopped waiting
			// for: treat its contact as registered, so that a move
			// unREGISTERs it before the new one.
			registered = tried
		}
		if out == stopped {
			break loop
		}
		if out == superseded {
			continue
		}
		wait := spec.retry
		switch {
		case err != nil:
			st.Registered, st.LastError = false, err.Error()
			st.Expires = time.Time{}
		case res.status >= 200 && res.status < 300 && res.granted > 0:
			now := time.Now()
			st.Registered, st.LastError = true, ""
			st.LastStatus, st.LastReason = res.status, res.reason
			st.LastSuccess, st.Expires = now, now.Add(res.granted)
			registered = spec.contact
			wait = spec.interval
			if res.granted < wait {
				// Refresh before the registrar's shorter expiry lapses.
				wait = max(res.granted*4/5, time.Second)
			}
		default:
			st.Registered = false
			st.LastStatus, st.LastReason = res.status, res.reason
			st.LastError = fmt.Sprintf("%d %s", res.status, res.reason)
			if res.status >= 200 && res.status < 300 {
				st.LastError = "registrar granted no expiry"
			}
			st.Expires = time.Time{}
		}
		st.NextRefresh = time.Now().Add(wait)
		b.report(st, true)
		if err != nil || !st.Registered {
			b.log.Debug("media/msr: registration not confirmed", "iface", st.Interface, "target", st.Target, "err", st.LastError, "retry", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			continue
		case s := <-b.upd:
			t.Stop()
			spec = s
			continue
		case <-b.stop:
			t.Stop()
			break loop
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	if ctx.Err() != nil || b.silent || !sent {
		return
	}
	if b.finalSnd != nil {
		spec.snd = b.finalSnd
	}
	if registered.Host != "" {
		spec.contact = registered
	}
	b.unregister(ctx, spec)
}

// attempt sends one REGISTER for spec with the given expiry, in a helper
// goroutine so that a new spec or removal interrupts it. On superseded,
// *spec holds the new spec; an interrupted attempt still returns what its
// send returned.
func (b *binding) attempt(ctx context.Context, spec *regSpec, expires int) (regResult, outcome, error) {
	actx, cancel := context.WithTimeout(ctx, spec.timeout)
	defer cancel()
	m := b.message(*spec, expires)
	type answer struct {
		r   regResult
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		r, err := spec.snd.send(actx, m)
		ch <- answer{r, err}
	}()
	finish := func(a answer) {
		if a.r.cseq > b.cseq {
			b.cseq = a.r.cseq
		}
	}
	select {
	case a := <-ch:
		finish(a)
		return a.r, answered, a.err
	case s := <-b.upd:
		cancel()
		a := <-ch
		finish(a)
		*spec = s
		return a.r, superseded, a.err
	case <-b.stop:
		cancel()
		a := <-ch
		finish(a)
		return a.r, stopped, a.err
	case <-ctx.Done():
		a := <-ch
		finish(a)
		return a.r, stopped, ctx.Err()
	}
}

// mayHaveRegistered says whether an interrupted REGISTER may have left
// its contact at the registrar: it was accepted, or its answer was not
// awaited (the request may have arrived all the same).
func mayHaveRegistered(r regResult, err error) bool {
	if err == nil {
		return r.status >= 200 && r.status < 300 && r.granted > 0
	}
	return r.status == 0 && !errors.Is(err, errClosed)
}

// unregister sends Expires: 0 for spec's contact, bounded by
// unregisterTimeout; a failure is only logged.
func (b *binding) unregister(ctx context.Context, spec regSpec) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(spec.timeout, unregisterTimeout))
	defer cancel()
	r, err := spec.snd.send(uctx, b.message(spec, 0))
	if r.cseq > b.cseq {
		b.cseq = r.cseq
	}
	if err != nil || r.status < 200 || r.status >= 300 {
		b.log.Info("media/msr: unREGISTER not confirmed", "iface", spec.iface.Name, "target", spec.target.addr,
			"status", r.status, "err", err)
	}
}

// message builds the next request of this registration (a new CSeq).
func (b *binding) message(s regSpec, expires int) regMsg {
	b.cseq++
	hs := slices.Clone(s.headers)
	if s.loadHeader != "" {
		hs = append(hs, header{s.loadHeader, strconv.Itoa(b.load())})
	}
	return regMsg{
		target:     s.target.addr,
		requestURI: s.requestURI,
		aor:        s.aor,
		display:    s.display,
		contact:    s.contact,
		callID:     b.callID,
		fromTag:    b.fromTag,
		cseq:       b.cseq,
		expires:    expires,
		headers:    hs,
		auth:       s.auth,
	}
}

// expirySeconds is the Expires value for d: whole seconds, rounded up,
// at least 1 (0 would be an unREGISTER).
func expirySeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
