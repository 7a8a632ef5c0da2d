package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"

	"github.com/ironflow/ironflow/workflows"
)

// TestRegionNamesCheckedBeforeStart: an unknown region is refused, listing the regions the
// worker knows, before any workflow or schedule exists, with and without --wait.
func TestRegionNamesCheckedBeforeStart(t *testing.T) {
	s := newMigrationSetup(t)
	rack := rackRegion(t)
	bulk := "bulk-" + uuid.NewString()
	sched := "sched-" + uuid.NewString()
	const known = ": the workers' regions file has region-a, region-b"
	tests := []struct {
		name     string
		endpoint string
		args     []string
		want     string
	}{
		{"migrate --to", s.source.url, []string{"machines", "migrate", "birdy", "--to", "region-c"}, `unknown region "region-c" (--to)` + known},
		{"migrate --to --wait", s.source.url, []string{"machines", "migrate", "Name:birdy", "--to", "region-c", "--wait"}, `unknown region "region-c" (--to)` + known},
		{"migrate --from", "", []string{"machines", "migrate", s.machine, "--from", "region-q", "--to", "region-b"}, `unknown region "region-q" (source: -E or --from)` + known},
		{"transfer --to", rack, []string{"racks", "transfer", "rack-a", "--to", "region-c"}, `unknown region "region-c" (--to)` + known},
		{"bulk --to", "", []string{"migrations", "bulk", "--name", bulk, "--from", "region-a", "--to", "region-c", "--pool", "p"}, `unknown region "region-c" (--to)` + known},
		{"bulk --from", "", []string{"migrations", "bulk", "--name", bulk, "--from", "region-q", "--to", "region-b", "--pool", "p", "--wait"}, `unknown region "region-q" (--from)` + known},
		{"schedule --to", "", []string{"migrations", "schedule", "create", sched, "--cron", "0 2 * * *", "--from", "region-a", "--to", "region-q", "--pool", "p"}, `unknown region "region-q" (--to)` + known},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := ironflow(t, tt.endpoint, tt.args...)
			if code == 0 || out != "" || stderr != "Error: "+tt.want+"\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want the error %q", code, out, stderr, tt.want)
			}
		})
	}
	for _, id := range []string{s.workflowID, workflows.BulkMigrateID(bulk)} {
		_, err := s.tc.DescribeWorkflowExecution(context.Background(), id, "")
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) {
			t.Errorf("an unknown region started %s: %v", id, err)
		}
	}
	if got := s.fake.called(s.workflowID); len(got) != 0 {
		t.Errorf("activities ran: %v", got)
	}
	for _, req := range s.source.seen() {
		if strings.HasPrefix(req, "POST /api/v1/migrate-grants") {
			t.Errorf("the source issued a grant for a move to an unknown region: %v", s.source.seen())
			break
		}
	}
	_, err := s.tc.ScheduleClient().GetHandle(context.Background(), workflows.BulkMigrateID(sched)).Describe(context.Background())
	var notFound *serviceerror.NotFound
	if !errors.As(err, &notFound) {
		t.Errorf("an unknown region created schedule %s: %v", sched, err)
	}
}

// TestWaitPrintsHumanFailures: with --wait, a failing migration prints the activity's message,
// not the SDK's wrapping (event IDs, worker identity, error type).
func TestWaitPrintsHumanFailures(t *testing.T) {
	temporalEnv(t)
	// The source authorises the move of a machine it does not have; ValidateMigration finds
	// it missing.
	t.Setenv(envEndpoint, newTestRegion(t, "region-a").url)
	unknown := uuid.NewString()
	id := workflows.MigrateMachineID(unknown)
	code, out, stderr := ironflow(t, "", "machines", "migrate", unknown, "--from", "region-a", "--to", "region-b", "--wait")
	notFound := "machine " + unknown + " not found on region region-a"
	for _, want := range []string{"\nerror: validating: " + notFound + "\n", "Error: migration " + id + " failed: " + notFound + "\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, noise := range []string{"activity error", "scheduledEventID", "retryable"} {
		if strings.Contains(stderr, noise) {
			t.Errorf("stderr shows %q:\n%s", noise, stderr)
		}
	}
	if code == 0 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	// show says the same.
	code, shown, _ := ironflow(t, "", "migrations", "show", unknown)
	if d := decode[migrationDetail](t, shown); code != 0 || d.Failure != notFound {
		t.Errorf("show: exit %d, failure %q", code, d.Failure)
	}
}

// TestFinishedMigrationsAndMachineKeys: cancel refuses a finished migration; show finds a
// migration by the machine's name on the -E region, and says how to find one it cannot.
func TestFinishedMigrationsAndMachineKeys(t *testing.T) {
	s := newMigrationSetup(t)
	if code, _, stderr := ironflow(t, s.source.url, "machines", "migrate", "birdy", "--to", "region-b", "--wait"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	code, out, stderr := ironflow(t, "", "migrations", "cancel", s.machine)
	want := "Error: migration " + s.workflowID + " already finished (completed at "
	if code == 0 || out != "" || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "there is nothing to cancel") {
		t.Errorf("cancel of a completed migration: exit %d, stdout %q, stderr %q; want %q", code, out, stderr, want)
	}
	for _, key := range []string{"Name:birdy", "birdy"} {
		code, out, stderr := ironflow(t, s.source.url, "migrations", "show", key)
		if d := decode[migrationDetail](t, out); code != 0 || d.WorkflowID != s.workflowID || d.Status != "completed" {
			t.Errorf("show %s: exit %d, %+v, %s", key, code, d, stderr)
		}
	}
	code, _, stderr = ironflow(t, s.source.url, "migrations", "show", "Name:nobody")
	want = `Error: no migration "Name:nobody": it is neither a workflow ID nor a machine UUID, and machine Name:nobody on ` + s.source.url +
		": machines Name:nobody not found (HTTP 404); give the machine UUID or the workflow ID (ironflow migrations list shows both), or point -E at the region that has the machine\n"
	if code == 0 || stderr != want {
		t.Errorf("show Name:nobody: exit %d, stderr\n%q\nwant\n%q", code, stderr, want)
	}
}

// TestCtrlCDuringWait: interrupting --wait leaves the migration running and says how to
// follow or cancel it, without a trailing "context canceled".
func TestCtrlCDuringWait(t *testing.T) {
	s := newMigrationSetup(t)
	s.fake.hold(t, s.workflowID)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- ironflowTo(ctx, &out, &errOut, s.source.url, "machines", "migrate", "birdy", "--to", "region-b", "--wait")
	}()
	eventually(t, func() string {
		if !strings.Contains(errOut.String(), workflows.PhaseCopying+"\n") {
			return "no copying phase shown yet: " + errOut.String()
		}
		return ""
	})
	cancel()
	if code := <-done; code == 0 {
		t.Errorf("an interrupted wait exited 0")
	}
	want := "Error: stopped waiting; the migration continues in the background. Follow it with `ironflow migrations show " + s.workflowID +
		"`, cancel it with `ironflow migrations cancel " + s.workflowID + "`\n"
	if stderr := errOut.String(); !strings.HasSuffix(stderr, want) || strings.Contains(stderr, "context canceled") {
		t.Errorf("stderr\n%s\nwant it to end with\n%s", stderr, want)
	}
	desc, err := s.tc.DescribeWorkflowExecution(context.Background(), s.workflowID, "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetStatus().String() != "Running" {
		t.Errorf("migration after the interrupt: %v, %v", desc.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	if code, _, stderr := ironflow(t, "", "migrations", "cancel", s.workflowID); code != 0 {
		t.Errorf("cancel: exit %d: %s", code, stderr)
	}
}

// TestShowRendersABulkRun: migrations show bulk-migrate/NAME shows the bulk run's input and
// counts, not an empty machine migration.
func TestShowRendersABulkRun(t *testing.T) {
	s := newBulkSetup(t, 2, 0)
	name := "shown-" + uuid.NewString()
	if code, _, stderr := ironflow(t, "", "migrations", "bulk", "--name", name, "--from", "region-a", "--to", "region-b", "--pool", s.pool, "--wait"); code != 0 {
		t.Fatalf("bulk: exit %d: %s", code, stderr)
	}
	id := workflows.BulkMigrateID(name)
	code, out, stderr := ironflow(t, "", "migrations", "show", id)
	d := decode[bulkDetail](t, out)
	if code != 0 || d.WorkflowID != id || d.Status != "completed" || d.Input == nil || d.Input.Selector.Pool != s.pool ||
		d.Result == nil || d.Result.Total != 2 || d.Result.Migrated != 2 {
		t.Errorf("show %s: exit %d, %+v, %s", id, code, d, stderr)
	}
	code, out, _ = ironflow(t, "", "migrations", "show", id, "-o", "table")
	if code != 0 || !strings.HasPrefix(out, "WORKFLOW ID") || !strings.Contains(out, "2/2 migrated, 0 failed") {
		t.Errorf("table:\n%s", out)
	}
}

// TestRegionCheckWithoutAWorker: with no worker on the task queue, the check says so instead
// of hanging, and nothing starts.
func TestRegionCheckWithoutAWorker(t *testing.T) {
	temporalEnv(t)
	const namespace = "ironflow-no-worker"
	if err := registerNamespace(shared.server.Address, namespace); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IRONFLOW_TEMPORAL_NAMESPACE", namespace)
	defer func(d time.Duration) { regionsTimeout = d }(regionsTimeout)
	regionsTimeout = time.Second
	source := newTestRegion(t, "region-a")
	machine := uuid.NewString()
	code, out, stderr := ironflow(t, source.url, "machines", "migrate", machine, "--from", "region-a", "--to", "region-b")
	want := "Error: no worker answered on task queue ironflow within 1s, so the region names cannot be checked: is `ironflow worker` (or make dev) running on this Temporal and namespace, and as recent as this CLI?\n"
	if code == 0 || out != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, out, stderr, want)
	}
}
