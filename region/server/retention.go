package server

import (
	"cmp"
	"context"
	"time"
)

// Retention bounds a log (the audit log, machines' syslog): entries older than MaxAge and all
// but the newest MaxCount are deleted every Interval (default defaultPruneInterval). Zero
// bounds are not applied.
type Retention struct {
	MaxAge   time.Duration
	MaxCount int
	Interval time.Duration
}

const defaultPruneInterval = time.Hour

// prune enforces ret on the log named what with fn until ctx ends, first at start. Every
// process of a region cluster prunes; the deletes are idempotent.
func (s *Server) prune(ctx context.Context, what string, ret Retention, fn func(context.Context, time.Duration, int) (int64, error)) error {
	if ret.MaxAge <= 0 && ret.MaxCount <= 0 {
		return nil
	}
	tick := time.NewTicker(cmp.Or(ret.Interval, defaultPruneInterval))
	defer tick.Stop()
	for {
		n, err := fn(ctx, ret.MaxAge, ret.MaxCount)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("pruning failed", "log", what, "error", err)
		case n > 0:
			s.log.Info("pruned", "log", what, "deleted", n, "max-age", ret.MaxAge, "max-count", ret.MaxCount)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
