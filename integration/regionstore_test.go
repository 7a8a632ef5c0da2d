package integration

import (
	"context"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/region/store"
)

// startRegionStore starts a PostgreSQL of the test's own with database db, opens a region's
// store on it with adminToken installed as its admin's, and returns the store and the token
// as the store keeps it; both go away with the test.
func startRegionStore(t testing.TB, db, adminToken string) (*store.Store, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := postgres.Start(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	if err := pg.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, pg.URL(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	token, _, err := st.BootstrapAdmin(ctx, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	return st, token
}
