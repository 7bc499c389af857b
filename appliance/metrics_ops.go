package appliance

import (
	"crypto/x509"
	"encoding/pem"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost/outpost/media/relay"
)

// opsMetrics are the metrics the shipped alerts and dashboard
// (deploy/) need beyond the counters of metricsHandler: the site the box
// serves (dashboards join on it), the management server certificate's
// expiry and the relay's worst jitter now.
type opsMetrics struct{ a *App }

var (
	siteInfoDesc = prometheus.NewDesc("outpost_site_info",
		"The site (site.name of the running document) the box serves (always 1).", []string{"site"}, nil)
	certExpiryDesc = prometheus.NewDesc("outpost_management_cert_expiry_timestamp_seconds",
		"NotAfter of the management server certificate (Unix time); absent while management is off.", nil, nil)
	relayJitterDesc = prometheus.NewDesc("outpost_relay_jitter_max_seconds",
		"Highest RFC 3550 interarrival jitter among the calls the relay anchors now, by the leg it comes from (0 without calls).", []string{"from"}, nil)
)

func (o opsMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- siteInfoDesc
	ch <- certExpiryDesc
	ch <- relayJitterDesc
}

func (o opsMetrics) Collect(ch chan<- prometheus.Metric) {
	cur := o.a.running()
	if cur != nil && cur.doc != nil {
		ch <- prometheus.MustNewConstMetric(siteInfoDesc, prometheus.GaugeValue, 1, cur.doc.Site.Name)
	}
	if cur != nil && cur.doc != nil && enabled(cur.doc.Management) {
		if b, _ := pem.Decode([]byte(cur.doc.Management.CertPEM)); b != nil {
			if c, err := x509.ParseCertificate(b.Bytes); err == nil {
				ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(c.NotAfter.Unix()))
			}
		}
	}
	j := o.a.media.maxJitter()
	for i, leg := range []string{"a", "b"} {
		ch <- prometheus.MustNewConstMetric(relayJitterDesc, prometheus.GaugeValue, j[i]/1000, leg)
	}
}

// maxJitter is the highest jitter (ms) per source leg among the calls in
// progress.
func (m *mediaPart) maxJitter() [2]float64 {
	m.mu.Lock()
	list := make([]*relay.Session, 0, len(m.live))
	for _, s := range m.live {
		list = append(list, s)
	}
	m.mu.Unlock()
	var out [2]float64
	for _, s := range list {
		st := s.Stats()
		for i := range out {
			out[i] = max(out[i], st[i].Jitter)
		}
	}
	return out
}
