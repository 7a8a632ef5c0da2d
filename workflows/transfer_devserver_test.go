package workflows_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/workflows"
)

// transferHistoryDir holds the recorded TransferRack histories; a directory of its own, as
// the replayer of testdata/*.json runs MigrateMachine only.
var transferHistoryDir = filepath.Join("testdata", "transfer")

// TestTransferRackOnDevServer runs TransferRack on a real Temporal server: the region
// activities and the children are fakes, the rack-local activities are the real ones on
// the rack's own task queue, served by a second worker. With -record it writes the history
// for TestReplayTransferRackHistories.
func TestTransferRackOnDevServer(t *testing.T) {
	c := devServer(t)
	machines := machineUUIDs(3)
	acts := newTransferActs(t, machines)
	children := &fakeChildren{duration: func(string) time.Duration { return 10 * time.Millisecond }}
	startTransferWorkers(t, c, acts, children)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, res := runTransfer(ctx, t, c, transferInput(2))
	if res.Machines != len(machines) || res.Released != 2 || children.maxRunning > 2 || len(children.started) != len(machines) {
		t.Errorf("result %+v, %d children with at most %d at once", res, len(children.started), children.maxRunning)
	}
	equal(t, "activities", acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"})
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "transfer_rack_history.json"))
	}
}

// TestReplayTransferRackHistories replays the recorded TransferRack histories against the
// current code: a change that would break transfers in flight fails here.
func TestReplayTransferRackHistories(t *testing.T) {
	replayDir(t, transferHistoryDir, 1, "go test ./workflows -run TransferRackOnDevServer -record", workflows.TransferRack, workflows.RecoverRackTransfer)
}

// startTransferWorkers runs, until the test ends, the main worker and the rack's worker of a
// transfer with acts and children; extra workflows are registered on the main one.
func startTransferWorkers(t *testing.T, c client.Client, acts *transferActs, children *fakeChildren, extra ...any) {
	t.Helper()
	main := worker.New(c, workflows.TaskQueue, worker.Options{})
	rack := worker.New(c, rackacts.TaskQueue(transferRack), worker.Options{})
	registerTransfer(main, rack, acts, children)
	for _, wf := range extra {
		main.RegisterWorkflow(wf)
	}
	for _, w := range []worker.Worker{main, rack} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
}

// runTransfer runs TransferRack with in under the rack's workflow ID until it ends.
func runTransfer(ctx context.Context, t *testing.T, c client.Client, in workflows.TransferRackInput) (client.WorkflowRun, workflows.TransferRackResult) {
	t.Helper()
	opts := client.StartWorkflowOptions{ID: workflows.TransferRackID(transferRack), TaskQueue: workflows.TaskQueue}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.TransferRack, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.TransferRackResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	return run, res
}

// TestTransferRackRunsOnDevServer runs a transfer whose machine phase continues as new
// twice (10 machines, 4 a run) on a real Temporal server. With -record it writes the first
// and the last run's histories for TestReplayTransferRackHistories.
func TestTransferRackRunsOnDevServer(t *testing.T) {
	c := devServer(t)
	machines := machineUUIDs(10)
	acts := newTransferActs(t, machines)
	acts.batchMoves = true
	acts.batchLeave[machines[9]] = true
	children := &fakeChildren{duration: func(string) time.Duration { return 10 * time.Millisecond }}
	startTransferWorkers(t, c, acts, children)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := transferInput(2)
	in.MachinesPerBatch, in.BatchesPerRun = 2, 2
	first, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(transferRack), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
	if err != nil {
		t.Fatal(err)
	}
	last := c.GetWorkflow(ctx, first.GetID(), "") // follows the runs it continues as new with
	var res workflows.TransferRackResult
	if err := last.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, first.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	lastRunID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if res.Machines != len(machines) || lastRunID == first.GetRunID() || !slices.Equal(children.started, []string{workflows.MigrateMachineID(machines[9])}) {
		t.Errorf("result %+v in runs %s..%s, per-machine children %v", res, first.GetRunID(), lastRunID, children.started)
	}
	equal(t, "activities", acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack",
		"RackMachines", "RackMachines", "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"})
	if *record {
		writeHistory(ctx, t, c, first, filepath.Join(transferHistoryDir, "transfer_rack_runs_first_history.json"))
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, first.GetID(), lastRunID), filepath.Join(transferHistoryDir, "transfer_rack_runs_last_history.json"))
	}
}

// On a real server: a cancel while the rack's pause is in flight waits for it before the
// unpause; a transfer whose undo failed is retried at once by the operator's compensation
// Update; a window above MaxBulkWindow is refused. With -record it writes each history for
// TestReplayTransferRackHistories.
func TestTransferRackCancelRetryAndRefusalOnDevServer(t *testing.T) {
	c := devServer(t)
	opts := client.StartWorkflowOptions{ID: workflows.TransferRackID(transferRack), TaskQueue: workflows.TaskQueue}
	start := func(t *testing.T, acts *transferActs, in workflows.TransferRackInput) (context.Context, client.WorkflowRun) {
		t.Helper()
		startTransferWorkers(t, c, acts, &fakeChildren{duration: func(string) time.Duration { return 10 * time.Millisecond }})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a loaded 2-core host
		t.Cleanup(cancel)
		run, err := c.ExecuteWorkflow(ctx, opts, workflows.TransferRack, in)
		if err != nil {
			t.Fatal(err)
		}
		// The subtests share the rack's workflow ID: a run a failed subtest left must not be
		// the next subtest's (a start under a running ID answers that run).
		t.Cleanup(func() { c.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "subtest over") })
		return ctx, run
	}
	t.Run("cancel during pause", func(t *testing.T) {
		acts := newTransferActs(t, machineUUIDs(2))
		acts.pauseHeld, acts.pauseRelease = make(chan struct{}), make(chan struct{})
		ctx, run := start(t, acts, transferInput(2))
		<-acts.pauseHeld
		cancelWhileStepRuns(ctx, t, c, run, "UnpauseRack")
		close(acts.pauseRelease)
		if err := run.Get(ctx, nil); !temporal.IsCanceledError(err) {
			t.Fatalf("workflow error %v, want a cancelled transfer", err)
		}
		equal(t, "activities", acts.recorded(), []string{"ValidateTransfer", "PauseRack", "UnpauseRack"})
		if *record {
			writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "transfer_rack_cancel_during_pause_history.json"))
		}
	})
	t.Run("compensation retried", func(t *testing.T) {
		acts := newTransferActs(t, machineUUIDs(2))
		acts.fail["CopyRack"], acts.fail["UnpauseRack"] = true, true
		ctx, run := start(t, acts, transferInput(2))
		testutil.Eventually(t, time.Minute, "the undo failed", func() bool { return acts.failures() > 1 }) // the copy's, then the unpause's
		acts.setFail("UnpauseRack", false)
		// The activity's failure is the fake's to count at once, the workflow's to see a moment
		// later: until it does, it refuses the retry (nothing is failing yet).
		testutil.Eventually(t, time.Minute, "the operator's retry accepted", func() bool { return sendOperatorRetry(ctx, c, run) == nil })
		if err := run.Get(ctx, nil); errorType(err) != "Refused" {
			t.Fatalf("workflow error %v, want the refused copy", err)
		}
		equal(t, "activities", acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "UndoRackCopy", "UnpauseRack", "UnpauseRack"})
		if *record {
			writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "transfer_rack_compensation_retried_history.json"))
		}
	})
	t.Run("window above the cap", func(t *testing.T) {
		acts := newTransferActs(t, machineUUIDs(2))
		ctx, run := start(t, acts, transferInput(workflows.MaxBulkWindow+1))
		if err := run.Get(ctx, nil); errorType(err) != workflows.ErrTypeInvalidInput {
			t.Fatalf("workflow error %v, want the window refused", err)
		}
		if *record {
			writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "transfer_rack_window_refused_history.json"))
		}
	})
}
