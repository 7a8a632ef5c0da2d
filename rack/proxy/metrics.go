package proxy

import "github.com/prometheus/client_golang/prometheus"

// Results of a proxied request (ironflow_proxy_requests_total's result label).
const (
	resultHit         = "hit"         // served from the cache without asking the upstream
	resultRevalidated = "revalidated" // served from the cache after the upstream's 304
	resultMiss        = "miss"        // fetched from the upstream, stored
	resultUncached    = "uncached"    // fetched from the upstream, not storable
	resultRefused     = "refused"     // answered by the proxy with a refusal
	resultError       = "error"       // the upstream failed
	resultTunnel      = "tunnel"      // a CONNECT tunnel opened
)

// Reasons of a refusal (ironflow_proxy_refusals_total's reason label).
const (
	refusedOutsider = "outsider"    // the client is in no served subnet
	refusedDisabled = "disabled"    // the region turned the proxy off
	refusedMethod   = "method"      // not GET, HEAD or CONNECT
	refusedRequest  = "bad-request" // not an absolute http URL, or a body
	refusedPort     = "port"        // CONNECT to a port not allowed, or http to a privileged one
	refusedTarget   = "target"      // the control plane, loopback, link-local
	refusedLoop     = "loop"        // the request came through a rack's proxy already
	refusedConns    = "connections" // a client over its connections (closed, not answered)
)

type metrics struct {
	requests    *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	upstreamErr prometheus.Counter
	cacheErr    prometheus.Counter
	inFlight    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, c *Cache) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_proxy_requests_total",
			Help: "Requests of machines to the rack's HTTP proxy, by result: hit, revalidated (a 304 upstream), miss (fetched and stored), uncached, refused, error (the upstream failed), tunnel (CONNECT).",
		}, []string{"result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_proxy_refusals_total",
			Help: "Requests the rack's HTTP proxy refused, by reason: outsider, disabled, method, bad-request, port, target (the control plane, loopback, link-local), loop, connections (a client's connection over its limit, closed).",
		}, []string{"reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_proxy_bytes_total",
			Help: "Body bytes the rack's HTTP proxy sent to its clients, by source: cache or upstream (CONNECT tunnels included).",
		}, []string{"source"}),
		upstreamErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_proxy_upstream_errors_total",
			Help: "Upstream requests of the rack's HTTP proxy that failed: no connection, no answer in time, a truncated body.",
		}),
		cacheErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_proxy_cache_write_errors_total",
			Help: "Objects the rack's HTTP proxy could not store (the disk full, a write error); the client still got them.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ironflow_proxy_requests_in_flight",
			Help: "Requests the rack's HTTP proxy is answering now, tunnels included.",
		}),
	}
	cs := []prometheus.Collector{m.requests, m.refusals, m.bytes, m.upstreamErr, m.cacheErr, m.inFlight}
	if c != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ironflow_proxy_cache_bytes", Help: "Bytes the rack's HTTP proxy cache holds on disk."},
				func() float64 { b, _ := c.Size(); return float64(b) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ironflow_proxy_cache_objects", Help: "Objects the rack's HTTP proxy cache holds."},
				func() float64 { _, n := c.Size(); return float64(n) }))
	}
	for _, col := range cs {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}
