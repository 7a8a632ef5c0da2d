package dhcp

import (
	"fmt"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the server's Prometheus metrics.
type Metrics struct {
	granted   prometheus.Counter
	naks      prometheus.Counter
	exhausted prometheus.Counter
	dropped   prometheus.Counter
	latency   [dhcpv4.MessageTypeInform + 1]prometheus.Observer // by message type; 0 for others
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ironflow_dhcp_request_duration_seconds",
		Help:    "Time to handle a DHCP request, including making a granted lease durable.",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 14), // 25µs .. 200ms
	}, []string{"type"})
	m := &Metrics{
		granted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_dhcp_leases_granted_total", Help: "DHCP ACKs that granted or renewed a lease."}),
		naks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_dhcp_naks_total", Help: "DHCP NAKs sent."}),
		exhausted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_dhcp_pool_exhausted_total", Help: "DISCOVERs left unanswered because the dynamic range was full."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_dhcp_requests_dropped_total", Help: "Requests answered with nothing because of an error."}),
	}
	m.latency[0] = latency.WithLabelValues("other")
	for t := dhcpv4.MessageTypeDiscover; t <= dhcpv4.MessageTypeInform; t++ {
		m.latency[t] = latency.WithLabelValues(t.String())
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.granted, m.naks, m.exhausted, m.dropped, latency} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register DHCP metrics: %w", err)
			}
		}
	}
	return m, nil
}

// observe records one handled request.
func (m *Metrics) observe(req, resp *dhcpv4.DHCPv4, err error, took time.Duration) {
	t := req.MessageType()
	if int(t) >= len(m.latency) {
		t = 0 // unknown types share one series: arbitrary packets must not create new ones
	}
	m.latency[t].Observe(took.Seconds())
	switch {
	case err != nil:
		m.dropped.Inc()
	case resp == nil:
	case resp.MessageType() == dhcpv4.MessageTypeNak:
		m.naks.Inc()
	case resp.MessageType() == dhcpv4.MessageTypeAck && req.MessageType() == dhcpv4.MessageTypeRequest:
		m.granted.Inc()
	}
}
