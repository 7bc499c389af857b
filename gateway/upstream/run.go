package upstream

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// work is one dispatched entry and the context its job runs in.
type work struct {
	e   *entry
	ctx context.Context
}

// Run sends REGISTERs until ctx ends: one dispatcher goroutine takes due
// entries from the queue at most ReplayRate per second and hands them to
// Workers worker goroutines. It returns nil on a clean stop, after every
// worker has returned. Bindings at HQ are left to expire (a restarting
// box registers them again). Only one Run at a time.
func (a *Agent) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return ErrRunning
	}
	a.running, a.runCtx = true, ctx
	a.newEpochLocked()
	workers := a.workers
	a.mu.Unlock()

	jobs := make(chan work)
	var wg sync.WaitGroup
	wg.Go(func() { a.recheckLoop(ctx) })
	for range workers {
		wg.Go(func() {
			for w := range jobs {
				a.work(w)
			}
		})
	}
	defer func() {
		a.mu.Lock()
		a.cancelEpoch()
		a.mu.Unlock()
		close(jobs)
		wg.Wait()
		a.mu.Lock()
		a.running, a.runCtx, a.epoch, a.cancelEpoch = false, nil, nil, nil
		a.mu.Unlock()
	}()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		a.mu.Lock()
		w, wait := a.nextLocked(time.Now())
		a.mu.Unlock()
		if w.e != nil {
			select {
			case jobs <- w:
				continue
			case <-ctx.Done():
				a.mu.Lock()
				w.e.busy = false
				a.q.schedule(w.e, w.e.due)
				a.mu.Unlock()
				return nil
			}
		}
		var fire <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-a.wake:
		case <-fire:
		}
		timer.Stop()
	}
}

// nextLocked pops the next entry to send if it is due and the pacer
// allows; otherwise it returns how long to wait (-1: until woken).
func (a *Agent) nextLocked(now time.Time) (work, time.Duration) {
	e := a.q.peek()
	if a.paused || e == nil {
		return work{}, -1
	}
	at := e.due
	if a.pace.next.After(at) {
		at = a.pace.next
	}
	if at.After(now) {
		return work{}, at.Sub(now)
	}
	a.q.pop()
	e.busy = true
	a.pace.take(now)
	return work{e: e, ctx: a.epoch}, 0
}

// work runs one job for w.e and files its result.
func (a *Agent) work(w work) {
	a.mu.Lock()
	j := a.prepareLocked(w.e, time.Now())
	a.mu.Unlock()
	if j == nil {
		return
	}
	r := a.exec(w.ctx, j)
	a.mu.Lock()
	// A job cut short by Pause or stop has no verdict; one that got its
	// final answer just before still counts.
	a.finishLocked(w.e, j, r, time.Now(), w.ctx.Err() != nil && r.code == 0)
	a.mu.Unlock()
	a.poke()
}

// prepareLocked snapshots what the job for e must do, or returns nil
// when there is nothing to do (the entry is then gone).
func (a *Agent) prepareLocked(e *entry, now time.Time) *job {
	j := &job{
		set: a.set, user: e.user, callID: e.callID, fromTag: e.fromTag, cseq: e.cseq,
		auth: &e.auth, prefer: e.target, redirect: e.redirect, redirectAlts: e.redirectAlts, gen: e.gen, cfgGen: a.cfgGen,
	}
	if e.want == opUnregister {
		if !e.live(now) {
			a.dropLocked(e) // expired at HQ by itself
			return nil
		}
		j.op, j.domain, j.contact = opUnregister, e.regDomain, e.regContact
		e.state = StateUnregistering
		return j
	}
	j.op, j.domain, j.expires = opRegister, j.set.domain, e.expires
	if j.expires == 0 {
		j.expires = j.set.expires
	}
	if e.live(now) {
		j.oldDomain, j.oldContact = e.regDomain, e.regContact
	}
	e.state = StateRegistering
	return j
}

// finishLocked files the result r of job j for e.
func (a *Agent) finishLocked(e *entry, j *job, r result, now time.Time, cancelled bool) {
	e.busy = false
	e.cseq = j.cseq
	if j.raised {
		e.expires = j.expires
	}
	if cancelled { // paused or stopping: no verdict, try again when allowed
		e.state = e.idleState(now)
		a.q.schedule(e, now)
		return
	}
	e.code, e.err = r.code, errText(r)
	if j.op == opUnregister {
		// Done, refused or unanswered: in every case stop claiming a
		// binding; an unanswered one expires at HQ by itself.
		e.regDomain, e.regContact, e.target, e.redirect, e.redirectAlts, e.expiresAt = "", "", "", "", nil, time.Time{}
		a.log.Debug("upstream unregister", "user", e.user, "code", r.code, "err", r.err)
		if e.want == opUnregister {
			a.dropLocked(e)
			return
		}
		e.state = StatePending // Set again meanwhile
		a.q.schedule(e, now)
		return
	}
	due := now
	if r.ok() {
		e.state, e.failures = StateRegistered, 0
		e.target, e.regDomain, e.regContact = r.target, j.domain, r.contact
		e.redirect, e.redirectAlts = "", nil
		if r.redirected {
			e.redirect, e.redirectAlts = r.target, r.alts
		}
		e.expiresAt = now.Add(r.granted)
		due = now.Add(refreshIn(r.granted))
		a.log.Debug("upstream registered", "user", e.user, "target", r.target, "expires", r.granted)
	} else {
		e.state = StateFailed
		e.redirect, e.redirectAlts = "", nil // back to HQ's targets (they may redirect again)
		e.failures++
		due = now.Add(a.backoff(j.set, e.failures, r.retryAfter))
		a.log.Debug("upstream register failed", "user", e.user, "code", r.code, "err", r.err, "retry_at", due)
	}
	if e.gen != j.gen || a.cfgGen != j.cfgGen {
		due = now // Remove, Set or Reconfigure while in flight: act on it now
	}
	a.q.schedule(e, due)
}

// refreshIn is when to refresh a binding granted for g: a tenth of g
// before it expires but at least Timer B (32 s, so that a target that
// never answers can be given up and another tried), and never earlier
// than half of g.
func refreshIn(g time.Duration) time.Duration {
	margin := min(max(g/10, 32*time.Second), g/2)
	return g - margin
}

// backoff is the delay before retrying after the n-th failure in a row.
func (a *Agent) backoff(s *settings, n int, retryAfter time.Duration) time.Duration {
	d := s.retryInterval << min(n-1, 4) // 1, 2, 4, 8, 16 × RetryInterval
	return max(d, retryAfter)
}

func errText(r result) string {
	if r.err == nil {
		return ""
	}
	return r.err.Error()
}

// recheckLoop runs recheck every Recheck until ctx ends.
func (a *Agent) recheckLoop(ctx context.Context) {
	for {
		a.mu.Lock()
		every := a.set.recheck
		a.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		a.recheck(ctx)
	}
}

// recheck finds, with a Pool trunk, the users whose binding is at
// another registrar than the first healthy one of their preference —
// they failed over to a backup and their primary is healthy again, or
// their registrar went down — and makes them due now (paced like every
// job). Their job registers at the first healthy registrar and, when
// that is the one they prefer, withdraws the binding left on the backup
// (afterRegister). Users sent elsewhere by a redirect stay there, and
// users in flight, failing or paused are left to their own schedule.
// It returns how many users it moved.
func (a *Agent) recheck(ctx context.Context) int {
	type bound struct{ user, target string }
	a.mu.Lock()
	set := a.set
	pool, ok := set.trunk.(Pool)
	if !ok || a.paused {
		a.mu.Unlock()
		return 0
	}
	now := time.Now()
	var bs []bound
	for _, e := range a.entries {
		if e.settled(now) {
			bs = append(bs, bound{e.user, e.target})
		}
	}
	a.mu.Unlock()
	if len(bs) == 0 {
		return 0
	}
	tctx, cancel := context.WithTimeout(ctx, set.timeout)
	cands, err := pool.Candidates(tctx)
	cancel()
	if err != nil {
		a.log.Debug("upstream: recheck: HQ targets", "err", err)
		return 0
	}
	var move []bound
	for _, b := range bs {
		p := stickyPlan(aorOf(b.user, set.domain), cands, set.transport)
		if f := p.first(); f != "" && f != b.target && p.eligible[f] {
			move = append(move, b)
		}
	}
	if len(move) == 0 {
		return 0
	}
	slices.SortFunc(move, func(x, y bound) int { return strings.Compare(x.user, y.user) })
	n := 0
	a.mu.Lock()
	now = time.Now()
	for _, b := range move {
		if e := a.entries[b.user]; e != nil && e.settled(now) && e.target == b.target && a.set == set {
			a.q.schedule(e, now)
			n++
		}
	}
	a.mu.Unlock()
	if n > 0 {
		a.log.Info("upstream: users moving to their first healthy registrar", "users", n)
		a.poke()
	}
	return n
}
