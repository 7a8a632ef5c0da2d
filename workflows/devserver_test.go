package workflows_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

var quietLogger = log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

var record = flag.Bool("record", false, "write the histories of the dev-server runs to testdata/ for the replay test")

// devServer starts the Temporal dev server (dev/temporalserver) on free loopback ports and
// returns a client; the server is stopped when the test ends. The test is skipped when the
// CLI has not been built (make bin/temporal, or $IRONFLOW_TEMPORAL_CLI).
func devServer(t *testing.T) client.Client {
	t.Helper()
	if _, err := temporalserver.FindCLI(); err != nil {
		t.Skipf("Temporal CLI not built: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := temporalserver.Start(ctx, temporalserver.Options{UIPort: -1, Headless: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for range 2 { // the second registration finds them all and does nothing
		if err := workers.RegisterSearchAttributes(ctx, c, "default"); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestMigrateMachineOnDevServer runs the workflow on a real Temporal server, with the real
// worker wiring and activities over fake regions: a migration of a machine with an agent that
// ends with the stub deleted, and one whose activation is refused, checked and compensated.
// With -record it writes both histories for TestReplayRecordedHistories.
func TestMigrateMachineOnDevServer(t *testing.T) {
	c := devServer(t)
	tests := []struct {
		name       string
		failActive bool
		wantPhase  string
		wantOnWest bool
	}{
		{"migrate_machine_history", false, workflows.PhaseCompleted, true},
		{"migrate_machine_compensated_history", true, workflows.PhaseFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			journal := &regiontest.Journal{}
			east := regiontest.New("east", "https://east.example:5240", journal)
			west := regiontest.New("west", "https://west.example:5240", journal)
			m := birdy()
			m.Meta[api.MetaAgentLastSeen] = "2026-11-30T06:00:00Z"
			east.Put(m)
			east.PutJobs(birdyJobs(api.JobFinished)...)
			if tt.failActive {
				west.Fail("Activate", 422, -1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			go checkInAtTarget(ctx, west)

			w := workers.NewMigrationWorker(c, &activities.Activities{Regions: regiontest.Resolver(t, east, west)}, workers.WithOptions(worker.Options{}))
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			defer w.Stop()

			in := input()
			in.SkipMachineDestroy = new(false)
			run, err := c.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(birdyUUID), workflows.MigrateMachine, in)
			if err != nil {
				t.Fatal(err)
			}
			err = run.Get(ctx, nil)
			if (err != nil) != tt.failActive {
				t.Fatalf("workflow error: %v", err)
			}
			if m, ok := west.Machine(birdyUUID); (ok && !isStubTo(m, "https://east.example:5240")) != tt.wantOnWest {
				t.Errorf("machine on west: %+v (present %v), want it there: %v", m, ok, tt.wantOnWest)
			}
			v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.ProgressQuery)
			if err != nil {
				t.Fatal(err)
			}
			var p workflows.Progress
			if err := v.Get(&p); err != nil || p.Phase != tt.wantPhase {
				t.Errorf("progress %+v (%v), want phase %s", p, err, tt.wantPhase)
			}
			desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
			if err != nil {
				t.Fatal(err)
			}
			if phase, _ := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()["MigrationPhase"]; phase == nil || string(phase.GetData()) != strconv.Quote(tt.wantPhase) {
				t.Errorf("MigrationPhase search attribute %s, want %q", phase, tt.wantPhase)
			}
			if *record {
				// Histories recorded before keep-promise and started-by-memo keep their names:
				// they must still replay.
				writeHistory(ctx, t, c, run, filepath.Join("testdata", "started_by_"+tt.name+".json"))
			}
		})
	}
}

// On a real server a second migration of a running machine is refused, and cancelling the
// running one compensates every step. With -record it writes the cancelled run's history.
func TestMigrateMachineOnDevServerRefusesSecondAndCancels(t *testing.T) {
	c := devServer(t)
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	m := birdy()
	m.Meta[api.MetaAgentLastSeen] = "2026-11-30T06:00:00Z" // an agent that never comes back
	east.Put(m)
	east.PutJobs(birdyJobs(api.JobFinished)...)
	w := workers.NewMigrationWorker(c, &activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	run, err := c.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(birdyUUID), workflows.MigrateMachine, input())
	if err != nil {
		t.Fatal(err)
	}
	waitForPhase(ctx, t, c, run, workflows.PhaseRepointing)
	_, err = c.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(birdyUUID), workflows.MigrateMachine, input())
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if !errors.As(err, &already) {
		t.Errorf("second migration: got %v, want WorkflowExecutionAlreadyStarted", err)
	}
	if err := c.CancelWorkflow(ctx, run.GetID(), run.GetRunID()); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); !temporal.IsCanceledError(err) {
		t.Fatalf("want a cancelled workflow, got %v", err)
	}
	got, _ := east.Machine(birdyUUID)
	if !reflect.DeepEqual(got, m) {
		t.Errorf("source after cancel:\n got %+v\nwant %+v", got, m)
	}
	if m, ok := west.Machine(birdyUUID); ok && !isStubTo(m, "https://east.example:5240") {
		t.Errorf("target holds %+v after cancel, want nothing or a stub sending the agent back", m)
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join("testdata", "keep_promise_migrate_machine_cancel_history.json"))
	}
}

// isStubTo reports a locked stub redirecting to endpoint.
func isStubTo(m api.Machine, endpoint string) bool {
	return m.Locked && !m.Runnable && m.Meta[api.MetaRedirectEndpoint] == endpoint
}

// waitForPhase polls run's progress until it reports phase.
func waitForPhase(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, phase string) {
	t.Helper()
	testutil.EventuallyOK(t, time.Minute, func() string {
		p, err := queryProgress[workflows.Progress](ctx, c, run.GetID(), run.GetRunID())
		if err == nil && p.Phase == phase {
			return ""
		}
		return fmt.Sprintf("phase %s not reached: last %+v, %v", phase, p, err)
	})
}

// queryProgress is the answer of workflow id's progress query.
func queryProgress[P any](ctx context.Context, c client.Client, id, runID string) (P, error) {
	var p P
	v, err := c.QueryWorkflow(ctx, id, runID, workflows.ProgressQuery)
	if err == nil {
		err = v.Get(&p)
	}
	return p, err
}

// checkInAtTarget plays the machine's agent: once the machine is on the target, it checks in.
func checkInAtTarget(ctx context.Context, west *regiontest.Region) {
	for ctx.Err() == nil {
		if _, ok := west.Machine(birdyUUID); ok {
			west.Update(birdyUUID, func(m *api.Machine) { m.Meta[api.MetaAgentLastSeen] = "2026-11-30T07:00:00Z" })
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeHistory(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, path string) {
	t.Helper()
	var h historypb.History
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
