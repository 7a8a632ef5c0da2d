package syslog

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a message is dropped (the label of ironflow_syslog_dropped_total).
const (
	DropMalformed    = "malformed"    // not syslog: no <PRI> at the start
	DropTooLong      = "too_long"     // longer than syslogmsg.MaxLine
	DropUnattributed = "unattributed" // its source address has no active lease or reservation here
	DropBufferFull   = "buffer_full"  // the buffer towards the region was full
	DropRateLimited  = "rate_limited" // its client sent more than RatePerClient/BurstPerClient allow
	DropRejected     = "rejected"     // the region refused it (see the region's ironflow_syslog_records_rejected_total)
	DropRefused      = "refused"      // the region refused its whole batch for its content
)

// Reasons a TCP connection is refused (the label of ironflow_syslog_connections_refused_total).
const (
	RefuseTotal        = "total"        // MaxConns connections were open
	RefusePerClient    = "per_client"   // MaxConnsPerClient connections of that address were open
	RefuseUnattributed = "unattributed" // no client holds its address and MaxUnattributedConns such connections were open
)

// Metrics are the receiver's and the forwarder's counters.
type Metrics struct {
	received *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	refused  *prometheus.CounterVec
	evicted  prometheus.Counter
	sent     prometheus.Counter
	depth    prometheus.Gauge
}

// NewMetrics registers the syslog metrics with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_syslog_received_total",
			Help: "Syslog messages received, by transport (udp, tcp).",
		}, []string{"transport"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_syslog_dropped_total",
			Help: "Syslog messages not delivered to the region, by reason (malformed, too_long, unattributed, buffer_full, rejected, refused).",
		}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_syslog_connections_refused_total",
			Help: "Syslog TCP connections closed at once because of the connection limits, by limit (total, per_client, unattributed).",
		}, []string{"limit"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_syslog_connections_evicted_total",
			Help: "Syslog TCP connections from unattributed addresses closed to give their slot to a client of the rack.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_syslog_forwarded_total",
			Help: "Syslog messages the region stored.",
		}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ironflow_syslog_buffer_depth",
			Help: "Syslog messages waiting to be sent to the region.",
		}),
	}
	for _, r := range []string{DropMalformed, DropTooLong, DropUnattributed, DropBufferFull, DropRateLimited, DropRejected, DropRefused} {
		m.dropped.WithLabelValues(r) // exported as 0 from the start
	}
	for _, r := range []string{RefuseTotal, RefusePerClient, RefuseUnattributed} {
		m.refused.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.received, m.dropped, m.refused, m.evicted, m.sent, m.depth} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("syslog metrics: %w", err)
			}
		}
	}
	return m, nil
}
