package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routeUnmatched labels requests no route pattern matched, so unknown paths cannot grow the
// number of label values.
const routeUnmatched = "unmatched"

// metrics are per Server (not the global registry) so tests can run several servers.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// leasesRejected counts leases of rack batches refused one by one, by store.Reject*.
	leasesRejected *prometheus.CounterVec
	// configWaiting counts racks' config long polls waiting for a change.
	configWaiting prometheus.Gauge
	// syslogRejected counts syslog messages of rack batches refused one by one, by store.Syslog*.
	syslogRejected *prometheus.CounterVec
	// enlistLimited counts enlistment reports refused over EnlistLimits, by limit.
	enlistLimited *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_region_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ironflow_region_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route pattern and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		leasesRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_lease_records_rejected_total",
			Help: "Leases of rack lease batches the region refused (the rest of each batch is stored), by reason.",
		}, []string{"reason"}),
		configWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ironflow_rack_config_long_polls",
			Help: "Rack config long polls waiting for a change (at most 2 per rack).",
		}),

		syslogRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_syslog_records_rejected_total",
			Help: "Syslog messages of rack batches the region refused (the rest of each batch is stored), by reason.",
		}, []string{"reason"}),
		enlistLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_enlist_limited_total",
			Help: "Enlistment reports answered 503 over the region's limits, by limit: rack (one caller's rate) or new-machines (the cap of New machines).",
		}, []string{"limit"}),
	}
	m.registry.MustRegister(m.requests, m.latency, m.leasesRejected, m.syslogRejected, m.configWaiting, m.enlistLimited,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

func (m *metrics) observe(route, method string, code int, elapsed time.Duration) {
	method = knownMethod(method)
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route, method).Observe(elapsed.Seconds())
}

// knownMethod bounds the method label to the standard methods.
func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// statusRecorder remembers the status code a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (MaxBytesReader closes it).
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
