package appliance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/config"
	"github.com/outpost/outpost/appliance/store"
	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/upstream"
)

// The App is the API's backend.
var _ api.Backend = (*App)(nil)

func (a *App) Status(context.Context) api.Status {
	cur := a.running()
	doc, v := cur.doc, cur.version
	bs := a.gw.Registrar().Bindings()
	aors := map[string]bool{}
	for _, b := range bs {
		aors[b.AOR] = true
	}
	s := a.gw.Registrar().Stats()
	ms := a.mode.Status()
	st := api.Status{
		Version:       a.opts.Version,
		Site:          doc.Site.Name,
		Mode:          string(ms.Mode),
		ModeSince:     ms.Since.UTC(),
		ModeReason:    string(ms.Reason),
		ModeCause:     string(ms.Cause),
		HoldUntil:     ms.HoldUntil.UTC(),
		Transitions:   a.transitions(),
		StartedAt:     a.started.UTC(),
		UptimeS:       int64(time.Since(a.started) / time.Second),
		ConfigVersion: v.Version,
		ConfigSource:  v.Source,
		DataDir:       a.opts.DataDir,
		Listeners:     a.gw.Listeners(),
		Management:    a.mgmt.Addr(),
		GOMAXPROCS:    runtime.GOMAXPROCS(0),
		AORs:          len(aors),
		Bindings:      len(bs),
		Registrar:     api.RegistrarStats(s),
		SIPDropped:    a.gw.Dropped(),
		HQ:            a.hqHealth(),
		HQUnresolved:  ms.Unresolved,
		PSTN:          a.pstnHealth(),
		CallsActive:   len(a.gw.Calls()),
	}
	st.SIPTLS = a.sipTLSStatus(doc)
	st.Pool = a.poolStatus()
	st.StatusPage, st.StatusPageError = a.status.Addr(), a.status.Failure()
	st.Upstream, st.UpstreamFailed = a.upstreamStatus()
	if on, until := a.gw.Draining(); on {
		st.Draining, st.DrainUntil = true, until.UTC()
	}
	return st
}

// upstreamStatus counts the upstream registrations by state and lists the
// first few failures.
func (a *App) upstreamStatus() (map[string]int, []api.UpstreamFailure) {
	es := a.gw.Upstream()
	if es == nil {
		return nil, nil
	}
	counts := map[string]int{}
	var failed []api.UpstreamFailure
	for _, e := range es {
		counts[string(e.State)]++
		if e.State == upstream.StateFailed && len(failed) < 10 {
			failed = append(failed, api.UpstreamFailure{User: e.User, Code: e.Code, Error: e.Error, Target: e.Target, Retry: e.NextAt.UTC()})
		}
	}
	return counts, failed
}

// transitions are the newest mode transitions, oldest first.
func (a *App) transitions() []api.ModeTransition {
	ts := a.mode.Transitions()
	ts = ts[max(0, len(ts)-statusTransitions):]
	out := make([]api.ModeTransition, len(ts))
	for i, t := range ts {
		out[i] = api.ModeTransition{From: string(t.From), To: string(t.To), Reason: string(t.Reason), Detail: t.Detail, At: t.At.UTC()}
	}
	return out
}

// statusTransitions bounds the mode history in status.
const statusTransitions = 10

// poolStatus is the registrar pool's status; nil for one box.
func (a *App) poolStatus() *api.Pool {
	p := a.gw.Pool()
	if p == nil {
		return nil
	}
	out := &api.Pool{Self: p.Self, HomedHere: p.HomedHere, ServedAsBackup: p.ServedAsBackup}
	for _, m := range p.Members {
		out.Members = append(out.Members, api.PoolMember{Name: m.Name, Target: m.Target, Self: m.Self, Up: m.Up,
			Serving: m.Serving, Since: m.Since.UTC(), Reason: m.Reason})
	}
	return out
}

func (a *App) hqHealth() []api.TargetHealth {
	var out []api.TargetHealth
	for _, t := range a.gw.HQHealth() {
		out = append(out, targetHealth(t))
	}
	return out
}

func (a *App) pstnHealth() []api.GatewayHealth {
	var out []api.GatewayHealth
	for _, g := range a.gw.PSTNHealth() {
		out = append(out, api.GatewayHealth{Name: g.Name, Probed: g.Probed, TargetHealth: targetHealth(g.TargetState)})
	}
	return out
}

func targetHealth(t health.TargetState) api.TargetHealth {
	return api.TargetHealth{Target: t.Target, Up: t.Up, BlockedUntil: t.BlockedUntil.UTC(),
		ConsecutiveOK: t.ConsecutiveOK, ConsecutiveFail: t.ConsecutiveFail,
		LastRTTMs: float64(t.LastRTT) / float64(time.Millisecond), LastChange: t.LastChange.UTC(), Reason: string(t.Reason),
		LastError: t.LastError}
}

func (a *App) Registrations(context.Context) []api.Registration {
	now := time.Now()
	bs := a.gw.Registrar().Bindings()
	out := make([]api.Registration, 0, len(bs))
	for _, b := range bs {
		out = append(out, api.Registration{
			AOR: b.AOR, Contact: b.Contact, Source: b.Source, Local: b.Local,
			Expires: b.Expires.UTC(), ExpiresInS: int64(b.Expires.Sub(now) / time.Second),
			Registered: b.Registered.UTC(), UserAgent: b.UserAgent, Instance: b.Instance,
		})
	}
	return out
}

func (a *App) Config(ctx context.Context, version int64) (api.ConfigResponse, error) {
	var v store.Version
	var raw []byte
	var err error
	if version == 0 {
		v, raw, err = a.st.ActiveConfig(ctx)
	} else {
		v, raw, err = a.st.Config(ctx, version)
	}
	if errors.Is(err, store.ErrNotFound) {
		return api.ConfigResponse{}, fmt.Errorf("config version %d: %w", version, api.ErrNotFound)
	}
	if err != nil {
		return api.ConfigResponse{}, err
	}
	doc, err := config.Parse(raw)
	if err != nil {
		return api.ConfigResponse{}, fmt.Errorf("stored version %d: %w", v.Version, err)
	}
	// Without HTML escaping, so that a redacted secret reads "<redacted>":
	// the API's encoder copies a raw document as it is.
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc.Redact()); err != nil {
		return api.ConfigResponse{}, err
	}
	return api.ConfigResponse{Version: apiVersion(v), Document: bytes.TrimSuffix(out.Bytes(), []byte("\n"))}, nil
}

func (a *App) History(ctx context.Context) ([]api.Version, error) {
	vs, err := a.st.History(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Version, len(vs))
	for i, v := range vs {
		out[i] = apiVersion(v)
	}
	return out, nil
}

func apiVersion(v store.Version) api.Version {
	return api.Version{Version: v.Version, AppliedAt: v.AppliedAt.UTC(), Source: v.Source, SHA256: v.SHA256, Active: v.Active}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (a *App) Route(_ context.Context, number string) api.RouteResult {
	m := routingMode(a.running().doc, a.mode.Mode())
	ex := a.gw.Route(number, m)
	return api.RouteResult{
		Number: number, Mode: string(m), Routed: ex.OK, Route: string(ex.Route), Target: ex.Target,
		Rule: ex.Rule, RuleIndex: ex.RuleIndex, Survivable: ex.Survivable, Emergency: ex.Emergency,
		Explain: ex.Explain, Targets: ex.Targets,
	}
}

func (a *App) Calls(context.Context) []api.Call {
	calls := a.gw.Calls()
	out := make([]api.Call, 0, len(calls))
	for _, c := range calls {
		media, streams := a.media.liveStats(c.ID)
		out = append(out, api.Call{ID: c.ID, From: c.From, To: c.To, Target: c.Target, Route: string(c.Route),
			State: c.State, Started: c.Started.UTC(), Answered: c.Answered.UTC(), Media: media, Streams: streams})
	}
	return out
}

// Firmware is the A/B updater the API serves at /api/v1/firmware (nil:
// this host has no A/B layout; the API then answers 404).
func (a *App) Firmware() api.Firmware { return a.opts.Firmware }

// Services lists the users' services in force (api.ServiceLister).
func (a *App) Services(context.Context) []api.UserServices {
	var out []api.UserServices
	for _, s := range a.services.under(a.running().parts.Services).list() {
		u := api.UserServices{Extension: s.Extension, DND: s.DND, ForwardAlways: s.ForwardAlways, ForwardBusy: s.ForwardBusy,
			ForwardNoAnswer: s.ForwardNoAnswer, NoAnswerS: int(s.NoAnswerAfter / time.Second)}
		for _, f := range s.FromPhone {
			u.FromPhone = append(u.FromPhone, string(f))
		}
		out = append(out, u)
	}
	return out
}

var _ api.ServiceLister = (*App)(nil)
