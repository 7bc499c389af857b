package health

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Pinger checks that one target is alive. The gateway implements it with a
// SIP OPTIONS request: any final response counts as alive (404, 405 and
// 483 included: the target answered), except a 5xx, for which Ping must
// return an error; no answer within ctx is an error too. rtt is used only
// when err is nil.
type Pinger interface {
	Ping(ctx context.Context, target string) (rtt time.Duration, err error)
}

// Prober probes every target of its current set every Interval, each with
// its own timeout (Config.Timeout) and its own goroutine, so one silent
// target never delays the others. Results go to the Tracker's ProbeResult.
//
// Interval and Timeout come from the Tracker's Config.
type Prober struct {
	tr   *Tracker
	ping Pinger
	wake chan struct{} // capacity 1: SetTargets → Run, bursts collapse

	mu      sync.Mutex
	targets []string         // the wanted set, sorted, no duplicates
	gen     map[string]int64 // running probe loops: target → generation
	nextGen int64
	running bool
}

// NewProber returns a Prober feeding tr with the answers of ping. It
// probes nothing until SetTargets and Run.
func NewProber(tr *Tracker, ping Pinger) *Prober {
	return &Prober{tr: tr, ping: ping, wake: make(chan struct{}, 1), gen: make(map[string]int64)}
}

// ErrRunning is returned by a second concurrent Prober.Run.
var ErrRunning = errors.New("gateway/health: prober already running")

// SetTargets replaces the set of probed targets. New targets are made
// known to the Tracker at once and start UP, so that a freshly booted box
// routes normally; DownAfter failed probes take a dead one down. Targets
// no longer in the set stop being probed and are forgotten by the Tracker
// (a late answer from their last probe is discarded). Safe to call before
// or during Run.
func (p *Prober) SetTargets(targets []string) {
	set := slices.Clone(targets)
	slices.Sort(set)
	set = slices.Compact(set)
	p.mu.Lock()
	var gone []string
	for _, old := range p.targets {
		if _, found := slices.BinarySearch(set, old); !found {
			gone = append(gone, old)
			delete(p.gen, old) // discard any answer still in flight
		}
	}
	p.targets = set
	p.tr.Forget(gone...)
	p.tr.Track(set...)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is already pending; Run reads the latest set
	}
}

// Targets returns the current probe set, sorted.
func (p *Prober) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.targets)
}

// Run probes until ctx ends, then stops every probe loop and waits for
// them; it returns nil on a clean stop. Only one Run at a time.
func (p *Prober) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return ErrRunning
	}
	p.running = true
	p.mu.Unlock()

	var wg sync.WaitGroup
	cancels := make(map[string]context.CancelFunc)
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
		wg.Wait()
		p.mu.Lock()
		p.running = false
		clear(p.gen)
		p.mu.Unlock()
	}()

	for {
		// Reconcile the running loops with the wanted set.
		p.mu.Lock()
		for name, cancel := range cancels {
			_, wanted := slices.BinarySearch(p.targets, name)
			if _, live := p.gen[name]; !wanted || !live {
				// Gone, or removed and re-added since: restart afresh.
				cancel()
				delete(cancels, name)
				delete(p.gen, name)
			}
		}
		for _, name := range p.targets {
			if _, ok := cancels[name]; ok {
				continue
			}
			tctx, cancel := context.WithCancel(ctx)
			cancels[name] = cancel
			p.nextGen++
			p.gen[name] = p.nextGen
			g := p.nextGen
			wg.Go(func() { p.loop(tctx, name, g) })
		}
		p.mu.Unlock()

		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
		}
	}
}

// loop probes one target now and then every Interval until ctx ends.
func (p *Prober) loop(ctx context.Context, name string, gen int64) {
	cfg := p.tr.cfg
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for {
		p.probe(ctx, name, gen, cfg.Timeout)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probe runs one Ping and feeds its result, unless the loop was stopped
// meanwhile (shutdown, or the target left the set).
func (p *Prober) probe(ctx context.Context, name string, gen int64, timeout time.Duration) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	rtt, err := p.ping.Ping(pctx, name)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil || p.gen[name] != gen {
		return
	}
	p.tr.ProbeError(name, err, rtt)
}
