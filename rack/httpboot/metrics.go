package httpboot

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	proxyErrors prometheus.Counter
	enlist      *prometheus.CounterVec
	// enlistLimited counts reports over EnlistLimits, by the limit: client or rack.
	enlistLimited *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, region Region) (*metrics, error) {
	m := &metrics{
		proxyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_httpboot_proxy_errors_total",
			Help: "Proxied agent/metadata requests answered 502 because no region was reachable.",
		}),
		enlist: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_httpboot_enlist_reports_total",
			Help: "Enlistment reports of unknown machines (iPXE and discovery environment) by result: created, matched, refused (by the region), invalid (by the rack), limited (over the rack's limits), error (no region).",
		}, []string{"result"}),
		enlistLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_httpboot_enlist_limited_total",
			Help: "Enlistment reports answered 503 over the rack's limits, by limit: client (one source address) or rack (all clients).",
		}, []string{"limit"}),
	}
	for _, c := range []prometheus.Collector{m.proxyErrors, m.enlist, m.enlistLimited, currentRegion{region}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var currentRegionDesc = prometheus.NewDesc("ironflow_rack_current_region",
	"The region endpoint the rack talks to first (always 1, labelled by URL).", []string{"url"}, nil)

// currentRegion reports the region link's current endpoint at scrape time.
type currentRegion struct{ region Region }

func (c currentRegion) Describe(ch chan<- *prometheus.Desc) { ch <- currentRegionDesc }

func (c currentRegion) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(currentRegionDesc, prometheus.GaugeValue, 1, c.region.Current().String())
}
