// Package backoff is the one exponential backoff of the daemons: the wait between attempts
// to reach something that is down doubles from Initial up to Max, optionally with jitter.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields the waits between consecutive failed attempts. The zero value is not
// useful: set Initial and Max. It is not safe for concurrent use; each retry loop has its own.
type Backoff struct {
	Initial time.Duration // the first wait
	Max     time.Duration // the waits double up to this cap
	// Jitter waits a random time in [d/2, d] instead of d ("equal jitter"), so that many
	// clients of a failed server do not come back in lockstep.
	Jitter bool
	// Rand returns a random duration in [0, n); nil means math/rand/v2. Tests inject one.
	Rand func(n time.Duration) time.Duration

	next time.Duration // the un-jittered wait Next returns next; 0 before the first
}

// Next returns the wait before the next attempt and advances the backoff.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = min(b.Initial, b.Max)
	}
	d := b.next
	b.next = min(2*d, b.Max)
	if !b.Jitter {
		return d
	}
	random := b.Rand
	if random == nil {
		random = rand.N[time.Duration]
	}
	half := d / 2
	return half + random(half+1)
}

// Reset starts the waits again from Initial, after an attempt succeeded.
func (b *Backoff) Reset() { b.next = 0 }

// Sleep waits d or until ctx ends, whichever comes first, and returns ctx's error in the
// second case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
