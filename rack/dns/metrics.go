package dns

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Answer sources and refusal reasons, the label values of the metrics.
const (
	fromCache    = "cache"
	fromRegion   = "region"
	fromUpstream = "upstream"
	fromStale    = "stale" // a cached answer served because its source was unreachable

	refusedNotServed  = "not_served"  // a query from outside the served subnets
	refusedNoUpstream = "no_upstream" // a name outside the region's zones, and no upstream configured
	refusedTransfer   = "transfer"    // a zone transfer over UDP, or of a zone not the region's
	refusedOpcode     = "opcode"      // not a standard query (NOTIMP)
	refusedClass      = "class"       // not class IN
	formerrOversized  = "oversized"   // a query larger than maxQuery
	formerrBadName    = "bad_name"    // a name with invalid labels
	formerrMalformed  = "malformed"   // not a DNS query (bad header, counts, or unparsable)
)

// metrics are the DNS server's Prometheus metrics.
type metrics struct {
	answers     *prometheus.CounterVec
	refused     *prometheus.CounterVec
	servfail    prometheus.Counter
	rateLimited prometheus.Counter
	busy        prometheus.Counter
	entries     prometheus.GaugeFunc
}

func newMetrics(reg prometheus.Registerer, entries func() float64) (*metrics, error) {
	m := &metrics{
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_dns_answers_total", Help: "DNS queries answered, by where the answer came from (cache, region, upstream, stale)."}, []string{"source"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ironflow_dns_refused_total", Help: "DNS queries refused (REFUSED, FORMERR or NOTIMP), by reason."}, []string{"reason"}),
		servfail: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_dns_servfail_total", Help: "DNS queries answered SERVFAIL: no source answered and nothing usable was cached."}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_dns_rate_limited_total", Help: "DNS queries dropped unanswered: their client (source address; all outsiders share one) was over its budget."}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ironflow_dns_busy_total", Help: "DNS lookups not started because as many as allowed were in flight (answered stale or SERVFAIL)."}),
		entries: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ironflow_dns_cache_entries", Help: "Answers in the DNS cache."}, entries),
	}
	for _, v := range []string{fromCache, fromRegion, fromUpstream, fromStale} {
		m.answers.WithLabelValues(v)
	}
	for _, v := range []string{refusedNotServed, refusedNoUpstream, refusedTransfer, refusedOpcode, refusedClass, formerrOversized, formerrBadName, formerrMalformed} {
		m.refused.WithLabelValues(v)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.answers, m.refused, m.servfail, m.rateLimited, m.busy, m.entries} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register DNS metrics: %w", err)
			}
		}
	}
	return m, nil
}
