package dhcp

import (
	"errors"
	"fmt"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the server's Prometheus metrics.
type Metrics struct {
	granted       prometheus.Counter
	naks          prometheus.Counter
	exhausted     prometheus.Counter
	failed        prometheus.Counter // dropped: the handler returned an error
	noReservation prometheus.Counter // dropped: unknown client on subnets without a dynamic range
	queueFull     prometheus.Counter // dropped unhandled: the oldest queued when the queue was full
	malformed     prometheus.Counter // dropped unhandled: not a DHCP packet
	queueDepth    prometheus.Gauge
	latency       [dhcpv4.MessageTypeInform + 1]prometheus.Observer // by message type; 0 for others
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
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ironflow_dhcp_queue_depth", Help: "Received DHCP packets waiting for a worker."}),
	}
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ironflow_dhcp_dropped_total", Help: "DHCP requests left unanswered, by reason."}, []string{"reason"})
	m.failed = dropped.WithLabelValues("error")
	m.noReservation = dropped.WithLabelValues("no_reservation")
	m.queueFull = dropped.WithLabelValues("queue_full")
	m.malformed = dropped.WithLabelValues("malformed")
	m.latency[0] = latency.WithLabelValues("other")
	for t := dhcpv4.MessageTypeDiscover; t <= dhcpv4.MessageTypeInform; t++ {
		m.latency[t] = latency.WithLabelValues(t.String())
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.granted, m.naks, m.exhausted, dropped, m.queueDepth, latency} {
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
	case errors.Is(err, ErrNoReservation):
		m.noReservation.Inc()
	case err != nil:
		m.failed.Inc()
	case resp == nil:
	case resp.MessageType() == dhcpv4.MessageTypeNak:
		m.naks.Inc()
	case resp.MessageType() == dhcpv4.MessageTypeAck && req.MessageType() == dhcpv4.MessageTypeRequest:
		m.granted.Inc()
	}
}
