package store

import (
	"context"
	"time"
)

// PruneEvents deletes audit events older than maxAge and all but the newest maxCount; a zero
// bound is not applied. It returns how many events it deleted.
func (s *Store) PruneEvents(ctx context.Context, maxAge time.Duration, maxCount int) (int64, error) {
	var deleted int64
	if maxAge > 0 {
		tag, err := s.pool.Exec(ctx, "DELETE FROM events WHERE time < now() - $1::interval", maxAge)
		if err != nil {
			return deleted, classify(err)
		}
		deleted += tag.RowsAffected()
	}
	if maxCount > 0 {
		tag, err := s.pool.Exec(ctx, `DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC OFFSET $1 LIMIT 1)`, maxCount)
		if err != nil {
			return deleted, classify(err)
		}
		deleted += tag.RowsAffected()
	}
	return deleted, nil
}
