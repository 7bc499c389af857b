package appliance

import (
	"context"
	"time"

	"github.com/outpost/outpost/appliance/api"
)

// The App drains the gateway on request (api.Drainer: outpostctl drain, a
// firmware update before its reboot) and when it stops (Run).
var _ api.Drainer = (*App)(nil)

// Drain starts or cancels refusing new calls; with wait it returns once the
// calls in progress have ended or the document's sip.drain_s is up.
func (a *App) Drain(ctx context.Context, on, wait bool) (api.DrainStatus, error) {
	if !on {
		a.gw.Drain(false, time.Time{})
		a.log.Info("drain cancelled: taking new calls again")
		return a.drainStatus(), nil
	}
	until := a.startDrain()
	if wait {
		wctx, cancel := context.WithDeadline(ctx, until)
		defer cancel()
		_ = a.gw.WaitIdle(wctx)
		// A pool member's users leave as their phones refresh: nothing
		// announces the last one, so look twice a second.
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for !a.drainStatus().Drained && wctx.Err() == nil {
			select {
			case <-t.C:
			case <-wctx.Done():
			}
		}
	}
	return a.drainStatus(), nil
}

// startDrain makes the gateway refuse new calls (keeping an earlier
// deadline if a drain is already on) and returns the deadline.
func (a *App) startDrain() time.Time {
	if on, until := a.gw.Draining(); on {
		return until
	}
	until := time.Now().Add(a.running().doc.SIP.EffectiveDrain())
	a.gw.Drain(true, until)
	a.log.Info("draining: new calls refused while calls in progress finish", "calls", len(a.gw.Calls()), "until", until)
	return until
}

func (a *App) drainStatus() api.DrainStatus {
	on, until := a.gw.Draining()
	st := api.DrainStatus{Draining: on, Until: until, Calls: len(a.gw.Calls()), Registered: a.gw.Registered()}
	users := st.Registered
	if a.running().doc.Pool == nil {
		users = 0 // a box alone keeps its users
	}
	st.Drained = on && (st.Calls == 0 && users == 0 || !time.Now().Before(until))
	return st
}

// drainForStop is the first step of stopping: new calls are refused, and
// the calls in progress get until the drain deadline to end.
func (a *App) drainForStop() {
	until := a.startDrain()
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	if err := a.gw.WaitIdle(ctx); err != nil {
		a.log.Warn("drain time is up: stopping with calls in progress", "calls", len(a.gw.Calls()))
		return
	}
	a.log.Info("drained: no call in progress")
}
