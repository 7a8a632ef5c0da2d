// Package pgtest gives each test its own database on a real PostgreSQL: the server named by
// IRONFLOW_TEST_DATABASE_URL, or a throwaway cluster started for the test binary.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/postgres"
)

// EnvURL names an existing server to use instead of starting one.
const EnvURL = "IRONFLOW_TEST_DATABASE_URL"

var (
	adminURL string
	counter  atomic.Int64
)

// Main starts PostgreSQL (unless EnvURL is set), runs the tests and stops it.
// Call it from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if u := os.Getenv(EnvURL); u != "" {
		adminURL = u
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pg, err := postgres.Start(ctx, "")
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: start PostgreSQL:", err)
		return 1
	}
	defer pg.Stop()
	adminURL = pg.URL("postgres")
	return m.Run()
}

// NewDatabase creates a fresh, empty database for t and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if adminURL == "" {
		t.Fatal("pgtest: call pgtest.Main from TestMain")
	}
	name := fmt.Sprintf("t_%d_%d_%s", os.Getpid(), counter.Add(1), sanitize(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := postgres.CreateDatabase(ctx, adminURL, name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '_'
	}, s)
}
