package dns

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// clientLimits are the clients' query budgets: a token bucket per source address, in a table
// of at most max buckets. Every address outside the served subnets shares one bucket of its
// own (they are only ever refused, and spoofing them must not crowd served clients out of the
// table or their overflow); while the table is full, clients without a bucket share another,
// so no number of source addresses buys more than the table's budgets.
type clientLimits struct {
	rate  rate.Limit
	burst int
	max   int
	idle  time.Duration // longer than an empty bucket takes to refill, so forgetting one grants nothing

	mu        sync.Mutex
	buckets   map[netip.Addr]*bucket
	outsiders *rate.Limiter
	overflow  *rate.Limiter
	lastSweep time.Time
}

type bucket struct {
	*rate.Limiter
	lastSeen time.Time
}

func newClientLimits(r rate.Limit, burst, max int) *clientLimits {
	return &clientLimits{
		rate: r, burst: burst, max: max,
		idle:      time.Minute + time.Duration(float64(burst)/float64(r)*float64(time.Second)),
		buckets:   map[netip.Addr]*bucket{},
		outsiders: rate.NewLimiter(r, burst),
		overflow:  rate.NewLimiter(r, burst),
	}
}

// allow spends one query of client's budget.
func (l *clientLimits) allow(client netip.Addr, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[client]
	if b == nil && len(l.buckets) >= l.max && now.Sub(l.lastSweep) > l.idle {
		l.sweep(now)
	}
	if b == nil {
		if len(l.buckets) >= l.max {
			return l.overflow.AllowN(now, 1)
		}
		b = &bucket{Limiter: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[client] = b
	}
	b.lastSeen = now
	return b.AllowN(now, 1)
}

// sweep forgets the buckets idle for l.idle: they have refilled, so a new one is the same.
func (l *clientLimits) sweep(now time.Time) {
	for a, b := range l.buckets {
		if now.Sub(b.lastSeen) > l.idle {
			delete(l.buckets, a)
		}
	}
	l.lastSweep = now
}

// allowOutsider spends one query of the budget all outsiders share.
func (l *clientLimits) allowOutsider(now time.Time) bool {
	return l.outsiders.AllowN(now, 1)
}

func (l *clientLimits) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
