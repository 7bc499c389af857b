package appliance

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outpost/outpost/mode"
)

// metricsHandler serves GET /metrics (Prometheus text format) from a
// registry of its own. Every value is read from the parts at scrape time,
// so the hot paths keep their plain atomic counters.
func (a *App) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "outpost", Name: name, Help: help}, f))
	}
	counter := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "outpost", Name: name, Help: help}, f))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "outpost", Name: "build_info", Help: "Build of outpostd (always 1).",
		ConstLabels: prometheus.Labels{"version": a.opts.Version},
	}, func() float64 { return 1 }))

	gauge("config_version", "Active config document version.", func() float64 {
		return float64(a.running().version.Version)
	})
	for _, m := range []mode.Mode{mode.Normal, mode.Survivable, mode.Standalone} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "outpost", Name: "mode", Help: "1 for the current operating mode.",
			ConstLabels: prometheus.Labels{"mode": string(m)},
		}, func() float64 {
			if a.mode.Mode() == m {
				return 1
			}
			return 0
		}))
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "outpost", Name: "mode_transitions_total", Help: "Times the box entered each mode (the start included).",
			ConstLabels: prometheus.Labels{"to": string(m)},
		}, func() float64 { return float64(a.mode.Counts()[m]) }))
	}
	gauge("draining", "1 while new calls are refused so that calls in progress can finish (stop, reboot, outpostctl drain).", func() float64 {
		if on, _ := a.gw.Draining(); on {
			return 1
		}
		return 0
	})
	r := a.gw.Registrar()
	gauge("registrar_bindings", "Registered contacts.", func() float64 { return float64(len(r.Bindings())) })
	gauge("registrar_users", "Users with at least one registered contact.", func() float64 {
		users := map[string]bool{}
		for _, b := range r.Bindings() {
			users[b.AOR] = true
		}
		return float64(len(users))
	})
	counter("hep_sent_total", "SIP messages sent to the HEP capture server (since the capture section last changed).", func() float64 {
		sent, _ := a.gw.HEPStats()
		return float64(sent)
	})
	counter("hep_dropped_total", "SIP messages not sent to the HEP capture server: queue full or server unreachable.", func() float64 {
		_, dropped := a.gw.HEPStats()
		return float64(dropped)
	})
	counter("registrar_registered_total", "REGISTERs that added or refreshed a binding.", func() float64 { return float64(r.Stats().Registered) })
	counter("registrar_unregistered_total", "Bindings removed by request.", func() float64 { return float64(r.Stats().Unregistered) })
	counter("registrar_expired_total", "Bindings removed by expiry.", func() float64 { return float64(r.Stats().Expired) })
	counter("registrar_challenges_total", "401 challenges sent.", func() float64 { return float64(r.Stats().Challenges) })
	counter("registrar_auth_failures_total", "Failed authentications (wrong password, unknown user).", func() float64 { return float64(r.Stats().AuthFailures) })
	counter("registrar_auth_blocked_total", "Requests refused unchecked from sources over the failure limit.", func() float64 { return float64(r.Stats().AuthBlocked) })
	counter("registrar_storm_refused_total", "503s of the registration-storm guard.", func() float64 { return float64(r.Stats().StormRefused) })
	gauge("calls_active", "Calls in progress.", func() float64 { return float64(len(a.gw.Calls())) })
	counter("cdr_written_total", "Call detail records stored.", func() float64 { return float64(a.cdr.written.Load()) })
	counter("cdr_dropped_total", "Call detail records lost (writer backlog full or store error).", func() float64 {
		return float64(a.cdr.dropped.Load() + a.cdr.failed.Load())
	})
	gauge("relay_sessions", "Calls whose media the relay anchors now.", func() float64 { return float64(a.media.r.Stats().Sessions) })
	gauge("relay_ports_in_use", "RTP/RTCP ports the relay holds.", func() float64 { return float64(a.media.r.Stats().PortsInUse) })
	counter("relay_refused_total", "RTP packets refused by the latching policy (not from the signalled source).", func() float64 {
		return float64(a.media.r.Stats().Refused)
	})
	reg.MustRegister(labelled{a})
	reg.MustRegister(opsMetrics{a})       // metrics_ops.go: certificate expiry, relay jitter
	reg.MustRegister(voicemailMetrics{a}) // voicemail.go
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// labelled collects the metrics whose label sets are only known at scrape
// time: calls by route and disposition, and per-target HQ health.
type labelled struct{ a *App }

var (
	callsTotalDesc = prometheus.NewDesc("outpost_calls_total", "Ended calls by route and disposition.", []string{"route", "disposition"}, nil)
	targetUpDesc   = prometheus.NewDesc("outpost_hq_target_up", "1 if the HQ target is up (OPTIONS probes) and not blocked by call failures.", []string{"target"}, nil)
	pstnUpDesc     = prometheus.NewDesc("outpost_pstn_gateway_up", "1 if the PSTN gateway is up (OPTIONS probes, when configured) and not blocked by call failures.", []string{"gateway"}, nil)
	targetRTTDesc  = prometheus.NewDesc("outpost_hq_target_probe_rtt_seconds", "Round-trip time of the last successful OPTIONS probe.", []string{"target"}, nil)
	relayPktDesc   = prometheus.NewDesc("outpost_relay_packets_total", "RTP packets received by the relay, by the leg they came from (a = caller).", []string{"from"}, nil)
	relayByteDesc  = prometheus.NewDesc("outpost_relay_bytes_total", "RTP bytes received by the relay, by the leg they came from.", []string{"from"}, nil)
	relayLostDesc  = prometheus.NewDesc("outpost_relay_lost_total", "RTP packets lost before reaching the relay (RFC 3550), by leg.", []string{"from"}, nil)
	overloadDesc   = prometheus.NewDesc("outpost_sip_overload_refusals_total", "New calls answered 503 because the box was overloaded, by reason: "+
		"queue (call setups waited for the CPU), memory (the live heap was full of recent calls' transactions); gateway/overload.go.", []string{"reason"}, nil)
	sipDropDesc = prometheus.NewDesc("outpost_sip_dropped_total", "SIP packets dropped unanswered or failing, by kind: the UDP fast path's not_sip, unparseable, "+
		"rate_limited (stateless refusals over their source's rate), stateless_ack (ACKs of stateless refusals); sipgo's unparseable, bad_request, unmatched_response, send_failed, …", []string{"kind"}, nil)
)

func (l labelled) Describe(ch chan<- *prometheus.Desc) {
	ch <- callsTotalDesc
	ch <- targetUpDesc
	ch <- targetRTTDesc
	ch <- pstnUpDesc
	ch <- relayPktDesc
	ch <- relayByteDesc
	ch <- relayLostDesc
	ch <- sipDropDesc
	ch <- overloadDesc
}

func (l labelled) Collect(ch chan<- prometheus.Metric) {
	for k, n := range l.a.cdr.Totals() {
		ch <- prometheus.MustNewConstMetric(callsTotalDesc, prometheus.CounterValue, float64(n), k.route, k.disposition)
	}
	rs := l.a.media.r.Stats()
	for i, leg := range []string{"a", "b"} {
		ch <- prometheus.MustNewConstMetric(relayPktDesc, prometheus.CounterValue, float64(rs.Packets[i]), leg)
		ch <- prometheus.MustNewConstMetric(relayByteDesc, prometheus.CounterValue, float64(rs.Bytes[i]), leg)
		ch <- prometheus.MustNewConstMetric(relayLostDesc, prometheus.CounterValue, float64(max(rs.Lost[i], 0)), leg)
	}
	for kind, n := range l.a.gw.DroppedByKind() {
		ch <- prometheus.MustNewConstMetric(sipDropDesc, prometheus.CounterValue, float64(n), kind)
	}
	queue, memory := l.a.gw.OverloadRefusals()
	ch <- prometheus.MustNewConstMetric(overloadDesc, prometheus.CounterValue, float64(queue), "queue")
	ch <- prometheus.MustNewConstMetric(overloadDesc, prometheus.CounterValue, float64(memory), "memory")
	now := time.Now()
	for _, t := range l.a.gw.HQHealth() {
		up := 0.0
		if t.Up && !t.BlockedUntil.After(now) {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(targetUpDesc, prometheus.GaugeValue, up, t.Target)
		ch <- prometheus.MustNewConstMetric(targetRTTDesc, prometheus.GaugeValue, t.LastRTT.Seconds(), t.Target)
	}
	for _, g := range l.a.gw.PSTNHealth() {
		up := 0.0
		if g.Up && !g.BlockedUntil.After(now) {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(pstnUpDesc, prometheus.GaugeValue, up, g.Name)
	}
}
