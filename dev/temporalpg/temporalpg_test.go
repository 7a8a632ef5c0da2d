package temporalpg

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

func TestStartRefusesIncompleteOptions(t *testing.T) {
	ctx := context.Background()
	if _, err := Start(ctx, Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "Postgres") {
		t.Errorf("Start without a cluster: %v, want an error naming Options.Postgres", err)
	}
	pg := &postgres.Cluster{}
	if _, err := Start(ctx, Options{Postgres: pg, Dir: t.TempDir(), Shards: -1}); err == nil || !strings.Contains(err.Error(), "shards") {
		t.Errorf("Start with -1 shards: %v, want an error about shards", err)
	}
}

// TestServerOnPostgres runs the real server: it needs the binary `make temporal-server`
// builds, named by $IRONFLOW_TEMPORAL_SERVER (so `make test`, which does not build it, skips).
func TestServerOnPostgres(t *testing.T) {
	bin := os.Getenv(EnvServer)
	if bin == "" {
		t.Skip("set " + EnvServer + " to a temporal-server binary (`make temporal-server` builds bin/temporal-server) to run the Temporal server on PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, err := postgres.Start(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	dir := t.TempDir()
	srv, err := Start(ctx, Options{Binary: bin, Postgres: pg, Dir: dir, MetricsPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Stop() }()

	if n := shardRows(ctx, t, pg); n != DefaultShards {
		t.Errorf("%d history shards in the database, want %d", n, DefaultShards)
	}
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := workers.RegisterSearchAttributes(ctx, c, Namespace); err != nil {
		t.Fatal(err)
	}
	// A workflow that sets a KeywordList attribute at its start is found by it (no worker runs
	// it: its start is what visibility records). Started right after the registration: the
	// frontend refuses it ("no mapping defined") until its namespace refresh, up to 2 s later,
	// unless RegisterSearchAttributes waits for that.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "temporalpg-test", TaskQueue: "temporalpg-test",
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.MachineUuidsKey.ValueSet([]string{"m-1", "m-2"})),
	}, "NoSuchWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	defer c.TerminateWorkflow(context.Background(), run.GetID(), "", "test over")
	waitFound(ctx, t, c, `MachineUuids = "m-2"`, run.GetID())

	metrics := scrapeMetrics(ctx, t, srv.MetricsURL)
	if !strings.Contains(metrics, "state_transition_count_count") {
		t.Errorf("the metrics at %s have no state_transition_count_count (what bench-moves reads)", srv.MetricsURL)
	}

	// A second start on the same databases sets nothing up again and finds the namespace.
	srv.Stop()
	if srv, err = Start(ctx, Options{Binary: bin, Postgres: pg, Dir: dir}); err != nil {
		t.Fatal("restart on the same databases: ", err)
	}
	c2, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	waitFound(ctx, t, c2, `MachineUuids = "m-1"`, run.GetID())
}

func shardRows(ctx context.Context, t *testing.T, pg *postgres.Cluster) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, pg.URL(stateDB))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The history service writes a shard's row when it takes the shard, just after the
	// frontend answers.
	return testutil.EventuallyValue(t, time.Minute, func() (int, string) {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM shards").Scan(&n); err != nil {
			return n, fmt.Sprintf("count the shards' rows: %v", err)
		}
		if n < DefaultShards {
			return n, fmt.Sprintf("%d shards' rows, want %d", n, DefaultShards)
		}
		return n, ""
	})
}

// waitFound polls a visibility query until it lists workflow id: visibility is written
// asynchronously after the start.
func waitFound(ctx context.Context, t *testing.T, c client.Client, query, id string) {
	t.Helper()
	testutil.EventuallyOK(t, time.Minute, func() string {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: Namespace, Query: query})
		if err != nil {
			return fmt.Sprintf("list %s: %v", query, err)
		}
		for _, e := range resp.GetExecutions() {
			if e.GetExecution().GetWorkflowId() == id {
				return ""
			}
		}
		return fmt.Sprintf("%s does not list %s", query, id)
	})
}

func scrapeMetrics(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
