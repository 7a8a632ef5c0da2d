package workflows_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// On a real server an undo that fails waits for its backoff, and an operator's retry Update
// runs it again at once; the run is undone and the Update is audited in the progress. With
// -record it writes the history, which covers the compensation loop and the Update.
func TestMigrateMachineCompensationUpdateOnDevServer(t *testing.T) {
	c := devServer(t)
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	east.Put(birdy())
	east.PutJobs(birdyJobs(api.JobFinished)...)
	east.Fail("FinalizeMigration", http.StatusUnprocessableEntity, -1)
	west.Fail("RedirectCopy", http.StatusForbidden, 1)
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
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		p, err := queryProgress[workflows.Progress](ctx, c, run.GetID(), run.GetRunID())
		if err == nil && len(p.Errors) > 1 {
			return ""
		}
		return fmt.Sprintf("the undo did not fail: last progress %+v, %v", p, err)
	})
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: workflows.CompensationUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{workflows.CompensationRequest{Action: workflows.CompensationRetry, Reason: "token fixed", By: "alice"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var note string
	if err := h.Get(ctx, &note); err != nil || !strings.Contains(note, "alice asked to retry") {
		t.Fatalf("update answer %q, %v", note, err)
	}
	if err := run.Get(ctx, nil); errorType(err) != activities.ErrTypeRegionRefused {
		t.Fatalf("workflow error %v, want the refused finalize", err)
	}
	if m, _ := east.Machine(birdyUUID); !m.Runnable {
		t.Errorf("source not restored: %+v", m)
	}
	if m, ok := west.Machine(birdyUUID); !ok || !isStubTo(m, "https://east.example:5240") {
		t.Errorf("target holds %+v (present %v), want a stub redirecting to east", m, ok)
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join("testdata", "audited_migrate_machine_compensation_update_history.json"))
	}
}

// An ESXi host the worker cannot reach fails the repoint; the undo leaves the host alone
// (Prepare changed nothing) and restores the source. With -record it writes the history.
func TestMigrateMachineESXiFailureOnDevServer(t *testing.T) {
	c := devServer(t)
	journal := &regiontest.Journal{}
	regions := map[string]*secretRegion{
		"https://east.example:5240": {Region: regiontest.New("east", "https://east.example:5240", journal), secrets: map[string]string{}},
		"https://west.example:5240": {Region: regiontest.New("west", "https://west.example:5240", journal), secrets: map[string]string{}},
	}
	east := regions["https://east.example:5240"]
	m := birdy()
	m.OS = "esxi-8.0u2" // no Address: SSH cannot reach it
	east.Put(m)
	east.PutJobs(birdyJobs(api.JobFinished)...)
	resolver, err := activities.NewRegions(map[string]activities.RegionConfig{
		"east": {URL: "https://east.example:5240"}, "west": {URL: "https://west.example:5240"},
	}, func(rc activities.RegionConfig) activities.Region { return regions[rc.URL] })
	if err != nil {
		t.Fatal(err)
	}
	w := workers.NewMigrationWorker(c, &activities.Activities{Regions: resolver})
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
	if err := run.Get(ctx, nil); errorType(err) != activities.ErrHostUnusable {
		t.Fatalf("workflow error %v, want %s", err, activities.ErrHostUnusable)
	}
	if got, _ := east.Machine(birdyUUID); !got.Runnable {
		t.Errorf("source not restored: %+v", got)
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join("testdata", "keep_promise_migrate_machine_esxi_failure_history.json"))
	}
}

// A bulk run whose first machine fails continues as new with the rest; the failure travels
// in the continuation. With -record both runs' histories are written.
func TestBulkMigrateFailuresAcrossContinueAsNewOnDevServer(t *testing.T) {
	c := devServer(t)
	names := []string{"fail-a", "fail-b", "fail-c"}
	uuids := []string{"4f6f8e0a-0000-4000-8000-00000000000a", "4f6f8e0a-0000-4000-8000-00000000000b", "4f6f8e0a-0000-4000-8000-00000000000c"}
	_, west := startBulkWorker(t, c, names, uuids, func(*api.Machine) {})
	west.Fail("Import", http.StatusUnprocessableEntity, 1) // the first machine's import is refused
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Names: names}, Window: 1, MachinesPerRun: 2}
	run, err := c.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions("with-failures"), workflows.BulkMigrate, in)
	if err != nil {
		t.Fatal(err)
	}
	firstRunID := run.GetRunID()
	var res workflows.BulkMigrateResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Total != 3 || res.Migrated != 2 || len(res.Failed) != 1 || res.Failed[0].Machine != uuids[0] {
		t.Errorf("result %+v, want %s failed and the rest migrated", res, uuids[0])
	}
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	lastRunID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if lastRunID == firstRunID {
		t.Fatal("the bulk migration did not continue as new")
	}
	if *record {
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, run.GetID(), firstRunID), filepath.Join(bulkHistoryDir, "keep_promise_bulk_failures_continued_as_new_history.json"))
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, run.GetID(), lastRunID), filepath.Join(bulkHistoryDir, "keep_promise_bulk_failures_continuation_history.json"))
	}
}

// slowImport is a region whose Import waits for release (the import in flight when the
// migration is cancelled), and lands anyway.
type slowImport struct {
	*regiontest.Region
	started chan struct{}
	release chan struct{}
}

func (r *slowImport) Import(ctx context.Context, req api.ImportRequest) (api.Machine, error) {
	close(r.started)
	<-r.release
	return r.Region.Import(context.WithoutCancel(ctx), req)
}

// On a real server, a cancel during the copy waits for the copy to stop
// (the activity heartbeats and is waited for) before the undo runs, so the undo removes what
// the import left instead of running beside it and leaving an orphan copy on the target.
func TestMigrateMachineCancelDuringCopyOnDevServer(t *testing.T) {
	c := devServer(t)
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := &slowImport{Region: regiontest.New("west", "https://west.example:5240", journal), started: make(chan struct{}), release: make(chan struct{})}
	east.Put(birdy())
	east.PutJobs(birdyJobs(api.JobFinished)...)
	ctx, run := startEastWestMigration(t, c, east, west)
	<-west.started
	cancelWhileStepRuns(ctx, t, c, run, "UndoCopy")
	close(west.release)
	if err := run.Get(ctx, nil); !temporal.IsCanceledError(err) {
		t.Fatalf("workflow error %v, want a cancelled migration", err)
	}
	if m, ok := west.Machine(birdyUUID); ok {
		t.Errorf("the target holds %+v after the cancelled copy: an orphan copy", m)
	}
	if m, _ := east.Machine(birdyUUID); !m.Runnable {
		t.Errorf("source not unquiesced: %+v", m)
	}
}

// historyHas reports whether run's history has an event of type typ (for a scheduled
// activity: of activity type activity).
func historyHas(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, typ enums.EventType, activity string) bool {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.GetEventType() != typ {
			continue
		}
		if activity == "" || e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activity {
			return true
		}
	}
	return false
}

// A cancel while a step's one request is in flight waits for its answer before undoing it:
// an Unquiesce that runs first finds nothing to undo, and the quiesce landing after it leaves
// the machine held by a migration that has ended (the kill-point harness, quiesce/cancel); a
// finalize landing after the undos of the finalize and of the copy leaves the source a stub
// with the target's copy undone (finalize/cancel-in-undo). With -record it writes each run's
// history.
func TestMigrateMachineCancelDuringRequestOnDevServer(t *testing.T) {
	c := devServer(t)
	for _, tt := range []struct {
		method, undo string // the held region call, and the undo that must wait for it
	}{
		{"Quiesce", "Unquiesce"},
		{"FinalizeMigration", "RestoreMigration"},
	} {
		t.Run(tt.method, func(t *testing.T) {
			journal := &regiontest.Journal{}
			east := regiontest.New("east", "https://east.example:5240", journal)
			west := regiontest.New("west", "https://west.example:5240", journal)
			east.Put(birdy())
			east.PutJobs(birdyJobs(api.JobFinished)...)
			held, release := east.Hold(tt.method)
			defer release()
			ctx, run := startEastWestMigration(t, c, east, west)
			<-held
			cancelWhileStepRuns(ctx, t, c, run, tt.undo)
			release()
			if err := run.Get(ctx, nil); !temporal.IsCanceledError(err) {
				t.Fatalf("workflow error %v, want a cancelled migration", err)
			}
			if m, _ := east.Machine(birdyUUID); !reflect.DeepEqual(m, birdy()) {
				t.Errorf("source after the cancelled migration:\n got %+v\nwant %+v", m, birdy())
			}
			if m, ok := west.Machine(birdyUUID); ok && !isStubTo(m, "https://east.example:5240") {
				t.Errorf("target holds %+v after cancel, want nothing or a stub sending the agent back", m)
			}
			if *record {
				writeHistory(ctx, t, c, run, filepath.Join("testdata", "cancel_during_"+strings.ToLower(tt.method)+"_history.json"))
			}
		})
	}
}

// cancelWhileStepRuns cancels run while a step's activity runs and checks that undo is not
// scheduled before the step ended: the workflow asks the step to stop in the same workflow
// task as it would schedule the undo without waiting, so once the request is in history no
// undo may be there yet.
func cancelWhileStepRuns(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, undo string) {
	t.Helper()
	if err := c.CancelWorkflow(ctx, run.GetID(), run.GetRunID()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the activity's cancel request in the history", func() bool {
		return historyHas(ctx, t, c, run, enums.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED, "")
	})
	if historyHas(ctx, t, c, run, enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, undo) {
		t.Errorf("the undo %s was scheduled while its step still ran", undo)
	}
}

// operatorRetries sends the operator's retry of the failing undo of run and waits for its answer.
func operatorRetries(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) {
	t.Helper()
	if err := sendOperatorRetry(ctx, c, run); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

// sendOperatorRetry sends the operator's retry of the failing undo of run; the workflow
// refuses it while no undo is failing.
func sendOperatorRetry(ctx context.Context, c client.Client, run client.WorkflowRun) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: workflows.CompensationUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{workflows.CompensationRequest{Action: workflows.CompensationRetry, Reason: "fixed", By: "alice"}},
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}

// startEastWestMigration runs a migration worker whose regions east and west are the given
// fakes and starts MigrateMachine of birdy from east to west; the worker stops with the test.
func startEastWestMigration(t *testing.T, c client.Client, east, west activities.Region) (context.Context, client.WorkflowRun) {
	t.Helper()
	return startEastWestMigrationOf(t, c, east, west, input())
}

// startEastWestMigrationOf is startEastWestMigration with input in.
func startEastWestMigrationOf(t *testing.T, c client.Client, east, west activities.Region, in workflows.MigrateMachineInput) (context.Context, client.WorkflowRun) {
	t.Helper()
	resolver, err := activities.NewRegions(map[string]activities.RegionConfig{
		"east": {URL: "https://east.example:5240"}, "west": {URL: "https://west.example:5240"},
	}, func(rc activities.RegionConfig) activities.Region {
		if rc.URL == "https://west.example:5240" {
			return west
		}
		return east
	})
	if err != nil {
		t.Fatal(err)
	}
	w := workers.NewMigrationWorker(c, &activities.Activities{Regions: resolver})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	run, err := c.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(birdyUUID), workflows.MigrateMachine, in)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, run
}

// On a real server: a migration waits for a running job with spaced-out checks, then fails
// naming it; an undo failing three times, each retried at once by the operator, is stuck and
// backs off further, then succeeds. With -record it writes both histories.
func TestMigrateMachineBoundedLoopsOnDevServer(t *testing.T) {
	c := devServer(t)
	newRegions := func() (*regiontest.Region, *regiontest.Region) {
		journal := &regiontest.Journal{}
		east := regiontest.New("east", "https://east.example:5240", journal)
		west := regiontest.New("west", "https://west.example:5240", journal)
		east.Put(birdy())
		return east, west
	}
	t.Run("job wait", func(t *testing.T) {
		east, west := newRegions()
		east.PutJobs(birdyJobs(api.JobRunning)...)
		in := input()
		in.WaitForRunningJob = time.Second
		ctx, run := startEastWestMigrationOf(t, c, east, west, in)
		if err := run.Get(ctx, nil); errorType(err) != workflows.ErrTypeJobRunning {
			t.Fatalf("workflow error %v, want the job still running", err)
		}
		if *record {
			writeHistory(ctx, t, c, run, filepath.Join("testdata", "bounded_job_wait_history.json"))
		}
	})
	t.Run("stuck undo", func(t *testing.T) {
		east, west := newRegions()
		east.PutJobs(birdyJobs(api.JobFinished)...)
		east.Fail("FinalizeMigration", http.StatusUnprocessableEntity, -1)
		west.Fail("RedirectCopy", http.StatusForbidden, 3) // three tries: a refusal is not retried within one
		ctx, run := startEastWestMigrationOf(t, c, east, west, input())
		for retried := range 3 {
			testutil.Eventually(t, 20*time.Second, "a failure of the undo", func() bool {
				v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.ProgressQuery)
				var p workflows.Progress
				return err == nil && v.Get(&p) == nil && len(p.Errors) > 1+retried
			})
			operatorRetries(ctx, t, c, run)
		}
		if err := run.Get(ctx, nil); errorType(err) != activities.ErrTypeRegionRefused {
			t.Fatalf("workflow error %v, want the refused finalize", err)
		}
		if m, _ := east.Machine(birdyUUID); !m.Runnable {
			t.Errorf("source not restored: %+v", m)
		}
		if *record {
			writeHistory(ctx, t, c, run, filepath.Join("testdata", "stuck_undo_backoff_history.json"))
		}
	})
}
