package store

import (
	"context"
	"time"
)

// Identity returns the region's stable UUID (generated on first start) and stores name.
func (s *Store) Identity(ctx context.Context, name string) (string, error) {
	if err := validName("region", name, false); err != nil {
		return "", err
	}
	var id string
	err := s.pool.QueryRow(ctx, `INSERT INTO region_identity (name) VALUES ($1)
		ON CONFLICT (singleton) DO UPDATE SET name = excluded.name RETURNING uuid::text`, name).Scan(&id)
	return id, classify(err)
}

// Heartbeat records that a region process with this public URL is alive now.
func (s *Store) Heartbeat(ctx context.Context, publicURL string) error {
	if err := validURL("region", "public URL", publicURL); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO region_processes (url, last_seen) VALUES ($1, now())
		ON CONFLICT (url) DO UPDATE SET last_seen = now()`, publicURL)
	return classify(err)
}

// Endpoints lists the public URLs of region processes seen within maxAge, sorted.
func (s *Store) Endpoints(ctx context.Context, maxAge time.Duration) ([]string, error) {
	if maxAge <= 0 {
		return nil, invalidf("endpoint max age %s must be positive", maxAge)
	}
	urls, err := queryStrings(ctx, s.pool, "SELECT url FROM region_processes WHERE last_seen >= now() - $1::bigint * interval '1 microsecond' ORDER BY url", maxAge.Microseconds())
	if err != nil {
		return nil, classify(err)
	}
	if urls == nil {
		urls = []string{}
	}
	return urls, nil
}
