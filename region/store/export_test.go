package store

import (
	"context"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests are in package store_test (dev/pgtest imports dev, which imports this package);
// these give them the internals they inspect.

// DB is the pool, for tests that look at tables directly.
func (s *Store) DB() *pgxpool.Pool { return s.pool }

// LatestMigration returns how many migrations are embedded and the highest version.
func LatestMigration() (count, version int, err error) {
	all, err := schemaMigrations()
	if err != nil {
		return 0, 0, err
	}
	return len(all), all[len(all)-1].version, nil
}

// KindNames lists the kinds the store has descriptors for.
func KindNames() []string { return slices.Sorted(maps.Keys(kinds)) }

// CompactDNSChanges folds every DNS change row into the serial's base, however few.
func (s *Store) CompactDNSChanges(ctx context.Context) error { return s.compactDNSChanges(ctx, 0) }
