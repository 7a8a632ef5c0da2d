package server

import (
	"cmp"
	"context"
	"time"
)

// Retention bounds the audit log: events older than MaxAge and all but the newest MaxCount
// are deleted every Interval (default defaultPruneInterval). Zero bounds are not applied.
type Retention struct {
	MaxAge   time.Duration
	MaxCount int
	Interval time.Duration
}

const defaultPruneInterval = time.Hour

// pruneEvents enforces the retention until ctx ends, first at start. Every process of a
// region cluster prunes; the deletes are idempotent.
func (s *Server) pruneEvents(ctx context.Context) error {
	ret := s.cfg.Retention
	if ret.MaxAge <= 0 && ret.MaxCount <= 0 {
		return nil
	}
	tick := time.NewTicker(cmp.Or(ret.Interval, defaultPruneInterval))
	defer tick.Stop()
	for {
		n, err := s.st.PruneEvents(ctx, ret.MaxAge, ret.MaxCount)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("pruning the audit log failed", "error", err)
		case n > 0:
			s.log.Info("audit log pruned", "deleted", n, "max-age", ret.MaxAge, "max-count", ret.MaxCount)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
