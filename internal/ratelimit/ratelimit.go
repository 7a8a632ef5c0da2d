// Package ratelimit holds token buckets by key (a client's address, a rack), bounded in
// number, for services that anybody on the machine network may call.
package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Take spends one token of l at now. When none is left it spends nothing and returns how
// long until one is (a Retry-After).
func Take(l *rate.Limiter, now time.Time) (ok bool, retryAfter time.Duration) {
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Hour // a zero burst never grants
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Keyed is one token bucket per key, at most maxKeys of them. Buckets idle for as long as an
// empty one takes to refill are forgotten: a new one is the same.
type Keyed[K comparable] struct {
	rate    rate.Limit
	burst   int
	maxKeys int
	idle    time.Duration

	mu        sync.Mutex
	buckets   map[K]*bucket
	lastSweep time.Time
}

type bucket struct {
	*rate.Limiter
	lastSeen time.Time
}

// NewKeyed gives each key r tokens per second and at most burst at once.
func NewKeyed[K comparable](r rate.Limit, burst, maxKeys int) *Keyed[K] {
	idle := time.Minute
	if r > 0 {
		idle = max(time.Second, time.Duration(float64(burst)/float64(r)*float64(time.Second)))
	}
	return &Keyed[K]{rate: r, burst: burst, maxKeys: maxKeys, idle: idle, buckets: map[K]*bucket{}}
}

// Take spends one token of key's bucket at now, as Take does. While maxKeys other keys hold
// buckets that have not refilled, a new key gets none: a caller with many keys (addresses)
// cannot make the table grow without bound.
func (k *Keyed[K]) Take(key K, now time.Time) (ok bool, retryAfter time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	if b == nil {
		// A full table is swept at most once a second, so a flood of new keys costs no
		// more than a sweep a second.
		if since := now.Sub(k.lastSweep); since > k.idle || len(k.buckets) >= k.maxKeys && since > time.Second {
			k.sweep(now)
		}
		if len(k.buckets) >= k.maxKeys {
			return false, k.idle
		}
		b = &bucket{Limiter: rate.NewLimiter(k.rate, k.burst)}
		k.buckets[key] = b
	}
	b.lastSeen = now
	return Take(b.Limiter, now)
}

func (k *Keyed[K]) sweep(now time.Time) {
	for key, b := range k.buckets {
		if now.Sub(b.lastSeen) > k.idle {
			delete(k.buckets, key)
		}
	}
	k.lastSweep = now
}
