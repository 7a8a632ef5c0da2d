package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestNewDatabaseIsUsableAndSeparate(t *testing.T) {
	ctx := context.Background()
	first, second := NewDatabase(t), NewDatabase(t)
	if first == second {
		t.Fatalf("two databases share one URL %s", first)
	}
	conn, err := pgx.Connect(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var n int
	err = other.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("second database sees the first one's table: n=%d err=%v", n, err)
	}
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s", version)
}
