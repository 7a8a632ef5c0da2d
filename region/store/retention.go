package store

import (
	"context"
	"time"
)

// PruneEvents deletes audit events older than maxAge and all but the newest maxCount; a zero
// bound is not applied. It returns how many events it deleted.
func (s *Store) PruneEvents(ctx context.Context, maxAge time.Duration, maxCount int) (int64, error) {
	return s.prune(ctx, "events", "time", maxAge, maxCount)
}

// PruneSyslog deletes syslog messages stored longer than maxAge ago and all but the newest
// maxCount (of all machines); a zero bound is not applied. It returns how many it deleted.
func (s *Store) PruneSyslog(ctx context.Context, maxAge time.Duration, maxCount int) (int64, error) {
	return s.prune(ctx, "syslog", "stored", maxAge, maxCount)
}

// prune deletes the rows of table (ordered by its id) whose timeColumn is older than maxAge,
// and all but the newest maxCount. table and timeColumn are constants of this package.
func (s *Store) prune(ctx context.Context, table, timeColumn string, maxAge time.Duration, maxCount int) (int64, error) {
	var deleted int64
	if maxAge > 0 {
		tag, err := s.pool.Exec(ctx, "DELETE FROM "+table+" WHERE "+timeColumn+" < now() - $1::interval", maxAge)
		if err != nil {
			return deleted, classify(err)
		}
		deleted += tag.RowsAffected()
	}
	if maxCount > 0 {
		tag, err := s.pool.Exec(ctx, "DELETE FROM "+table+" WHERE id <= (SELECT id FROM "+table+" ORDER BY id DESC OFFSET $1 LIMIT 1)", maxCount)
		if err != nil {
			return deleted, classify(err)
		}
		deleted += tag.RowsAffected()
	}
	return deleted, nil
}
