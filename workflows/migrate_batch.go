package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
)

// The batched path of TransferRack and BulkMigrate: a MigrateMachineBatch child moves up to
// activities.MaxBatchMachines machines in one activity, so a machine costs Temporal a share
// of a few events instead of a child workflow of about fifty. Machines that need an agent
// wait, an ESXi repoint or a running job drained come back from the batch untouched and take
// the per-machine path (a MigrateMachine child each).

// batchChange is the GetVersion change ID of the batched path; runs recorded before it start
// a MigrateMachine child per machine.
const batchChange = "batch-machines"

// Batch sizing. A batch's machines are its MachineUuids search attribute: 50 UUIDs stay well
// under the server's per-workflow search-attribute size limit. Two batches run at once so one
// batch's slowest machines do not leave the regions idle; more only queue in the worker.
const (
	machinesPerBatch = 50
	maxBatchesAtOnce = 2
)

// batchWindow splits window, the machines a move migrates at once, into batches at once and
// machines at once in each batch. Window 0 (the input said nothing) is maxBatchesAtOnce
// batches of activities.DefaultBatchParallelism machines each.
func batchWindow(window int) (batchesAtOnce, parallelism int) {
	if window == 0 {
		return maxBatchesAtOnce, activities.DefaultBatchParallelism
	}
	batchesAtOnce = min(window, maxBatchesAtOnce)
	return batchesAtOnce, window / batchesAtOnce
}

// maxFailureSample bounds the failures a transfer keeps in its progress and error message;
// every machine's failure is in its batch's result.
const maxFailureSample = 20

// MigrateMachineBatchInput names the machines of one batch.
type MigrateMachineBatchInput struct {
	SourceRegion string
	TargetRegion string
	Machines     []string // UUIDs
	// Grant is the parent's rack or bulk grant (region/api/grants.go).
	Grant string `json:",omitempty"`
	// MoveRun is the first run of the parent's chain (MigrateMachineInput.MoveRun).
	MoveRun string `json:",omitempty"`
	// Parallelism is how many of the machines move at once; 0 means
	// activities.DefaultBatchParallelism.
	Parallelism int `json:",omitempty"`
}

// batchSettleChange is the GetVersion change ID of batches that settle every machine they
// touched before they return (settleBatch); runs recorded before it return with machines
// half-moved when the batch's attempts run out. It is asked only on that path, so runs that
// never take it carry no marker.
const batchSettleChange = "batch-settles-its-machines"

// batchSettleOptions retry a settling batch until every machine is finished or undone, however
// long a region is down: each attempt gives up within a minute or two on a region that does
// not answer, and attempts come at most five minutes apart, so history does not grow while
// it waits (activity retries add no event).
var batchSettleOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Minute,
	HeartbeatTimeout:    30 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
}

// batchOptions: the batch heartbeats while it runs, and a cancel waits for it, which stops
// each machine at its next step boundary and undoes or finishes it.
var batchOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Minute,
	HeartbeatTimeout:    30 * time.Second,
	WaitForCancellation: true,
	RetryPolicy:         regionCallOptions.RetryPolicy,
}

// MigrateMachineBatch moves a batch of machines with one MigrateBatch activity and returns
// what happened to each (activities.BatchResult). Its MachineUuids search attribute lists the
// batch's machines, so `MachineUuids = "<uuid>"` finds every machine's move; it sets no
// phase: its one step is the whole run.
func MigrateMachineBatch(ctx workflow.Context, in MigrateMachineBatchInput) (activities.BatchResult, error) {
	var res activities.BatchResult
	if err := checkOwnID(ctx, "a batch of machines, which only a rack transfer or bulk run starts (as <its ID>/batch/<first machine>),", batchIDFor(ctx, in)); err != nil {
		return res, err
	}
	batch := activities.BatchInput{
		SourceRegion: in.SourceRegion, TargetRegion: in.TargetRegion, Machines: in.Machines, Grant: in.Grant,
		Parallelism: in.Parallelism, Migration: workflow.GetInfo(ctx).WorkflowExecution.ID,
	}
	batch.Move, batch.MoveRun = moveOf(ctx, in.MoveRun)
	err := call(ctx, batchOptions, acts.MigrateBatch, batch, &res)
	unsettled := unsettledMachines(in.Machines, res, err)
	if len(unsettled) == 0 || workflow.GetVersion(ctx, batchSettleChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return res, err
	}
	return settleBatch(ctx, batch, unsettled, res, err)
}

// unsettledMachines are the machines of a batch that may be half-moved after its MigrateBatch
// returned res, err: all of them when it failed for a reason retrying could fix or was
// cancelled (any may be anywhere between quiesce and activation), those whose undo kept
// failing otherwise. A batch refused as a whole (non-retryable) touched none.
func unsettledMachines(machines []string, res activities.BatchResult, err error) []string {
	var appErr *temporal.ApplicationError
	switch {
	case err != nil && errors.As(err, &appErr) && appErr.NonRetryable():
		return nil
	case err != nil:
		return machines
	}
	var stuck []string
	for _, f := range res.Failed {
		if f.Type == activities.ErrTypeBatchUndoFailed {
			stuck = append(stuck, f.Machine)
		}
	}
	return stuck
}

// settleBatch settles the unsettled machines of a batch whose MigrateBatch returned res, err:
// on a context a cancel does not reach, retried however long a region is down, each machine
// finished past its commit point and undone before it. Its result replaces theirs in res; a
// batch whose activity was cancelled still reports the cancel.
func settleBatch(ctx workflow.Context, batch activities.BatchInput, unsettled []string, res activities.BatchResult, err error) (activities.BatchResult, error) {
	reason := "its undo kept failing"
	switch {
	case ctx.Err() != nil:
		reason = "the batch was cancelled"
	case err != nil:
		reason = "the batch gave up: " + truncated(err.Error())
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Settling %d machines (%s): each is finished past its commit point or undone, retried until its regions answer.", len(unsettled), reason))
	batch.Machines, batch.Settle, batch.Reason = unsettled, true, reason
	settleCtx, _ := workflow.NewDisconnectedContext(ctx)
	var settled activities.BatchResult
	if serr := call(settleCtx, batchSettleOptions, acts.MigrateBatch, batch, &settled); serr != nil {
		return res, serr
	}
	res.Failed = slices.DeleteFunc(res.Failed, func(f activities.BatchFailure) bool { return slices.Contains(unsettled, f.Machine) })
	res.Moved = append(res.Moved, settled.Moved...)
	res.PerMachine = append(res.PerMachine, settled.PerMachine...)
	res.Failed = append(res.Failed, settled.Failed...)
	if temporal.IsCanceledError(err) {
		return res, err
	}
	return res, nil
}

// batchIDFor is the canonical ID of the batch ctx runs: the one its parent, a transfer or bulk
// run, names it by (batchChildOptions); "" for a batch that is no workflow's child, or has no
// machine.
func batchIDFor(ctx workflow.Context, in MigrateMachineBatchInput) string {
	p := workflow.GetInfo(ctx).ParentWorkflowExecution
	if p == nil || len(in.Machines) == 0 {
		return ""
	}
	return MigrateMachineBatchID(p.ID, in.Machines[0])
}

// batchChildOptions start the batch of machines as a child of the workflow whose ID is
// parent: one ID per batch (its first machine), cancelled with its parent, its machines and
// regions in its search attributes from the start.
func batchChildOptions(parent string, in MigrateMachineBatchInput) workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:            MigrateMachineBatchID(parent, in.Machines[0]),
		TaskQueue:             TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			MachineUuidsKey.ValueSet(in.Machines), SourceRegionKey.ValueSet(in.SourceRegion), TargetRegionKey.ValueSet(in.TargetRegion)),
	}
}

// batchSize is an input's MachinesPerBatch: n, or machinesPerBatch when n is 0.
func batchSize(n int) int {
	if n == 0 {
		return machinesPerBatch
	}
	return n
}

// checkBatchSize refuses a MachinesPerBatch outside 0..machinesPerBatch.
func checkBatchSize(n int) error {
	if n < 0 || n > machinesPerBatch {
		return fmt.Errorf("MachinesPerBatch %d is not between 1 and %d (0: %d)", n, machinesPerBatch, machinesPerBatch)
	}
	return nil
}

// batches cuts machines into batches of at most size, in order.
func batches(machines []string, size int) [][]string {
	var out [][]string
	for len(machines) > 0 {
		n := min(len(machines), size)
		out = append(out, machines[:n])
		machines = machines[n:]
	}
	return out
}

// runBatches moves machines in MigrateMachineBatch children of at most size machines of the
// workflow whose ID is parent, window machines at once (batchWindow; an operator may change it through ctl from
// the next batch on), and calls done with each batch's result as it ends; running (when not
// nil) counts the machines of the batches running. It starts no more batches once ctx is
// cancelled or more (when not nil) says no, and none while ctl is paused. A batch that
// failed as a whole (e.g. a region the worker does not know) reports each of its machines
// failed with its error.
func runBatches(ctx workflow.Context, parent string, in MigrateMachineBatchInput, machines []string, size int, ctl *moveControls, window int, more func() bool, running *int, done func(activities.BatchResult)) {
	var counted int
	if running == nil {
		running = &counted
	}
	batchesAtOnce := func() int {
		n, _ := batchWindow(ctl.windowOr(window))
		return n
	}
	runWindowed(ctx, batches(machines, size), ctl, batchesAtOnce, more,
		func(ctx workflow.Context, machines []string) workflow.Future {
			*running += len(machines)
			in.Machines = machines
			_, in.Parallelism = batchWindow(ctl.windowOr(window))
			return workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, batchChildOptions(parent, in)), MigrateMachineBatch, in)
		},
		func(machines []string, f workflow.Future) {
			*running -= len(machines)
			var res activities.BatchResult
			if err := f.Get(ctx, &res); err != nil {
				res = activities.BatchResult{}
				for _, m := range machines {
					res.Failed = append(res.Failed, activities.BatchFailure{Machine: m, Type: errorTypeOf(err), Error: err.Error()})
				}
			}
			done(res)
		})
}

// errorTypeOf is the type of the application error err is or wraps, "" when none.
func errorTypeOf(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// migrateBatches moves machines on the batched path and returns those that need the
// per-machine path. After a batch with a failure it starts no more batches, waits for the
// running ones and fails.
func (t *rackTransfer) migrateBatches(ctx workflow.Context, machines []string) ([]string, error) {
	var perMachine, failures []string
	failed, ended := 0, 0
	in := MigrateMachineBatchInput{SourceRegion: t.in.SourceRegion, TargetRegion: t.in.TargetRegion, Grant: t.in.Grant, MoveRun: moveRunOf(ctx)}
	// The canonical ID of the transfer (not its own, which a replayer does not know).
	runBatches(ctx, TransferRackID(t.in.Rack), in, machines, batchSize(t.in.MachinesPerBatch), &t.ctl, t.in.Window, func() bool { return failed == 0 }, &t.progress.MachinesRunning, func(res activities.BatchResult) {
		ended += len(res.Moved) + len(res.PerMachine) + len(res.Failed)
		t.progress.MachinesDone += len(res.Moved)
		t.progress.MachinesFailed += len(res.Failed)
		failed += len(res.Failed)
		perMachine = append(perMachine, res.PerMachine...)
		for _, fl := range res.Failed {
			if len(failures) < maxFailureSample {
				failures = append(failures, fmt.Sprintf("machine %s: %s", fl.Machine, fl.Error))
			}
		}
	})
	if ctx.Err() != nil {
		return nil, temporal.NewCanceledError()
	}
	if failed > 0 {
		t.progress.Errors = append(t.progress.Errors, failures...)
		more := ""
		if failed > len(failures) {
			more = fmt.Sprintf(" (and %d more, in the results of the batches %s/batch/*)", failed-len(failures), TransferRackID(t.in.Rack))
		}
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%d of %d machines failed to migrate (%d moved, %d not started): %s%s", failed, t.progress.MachinesTotal,
				t.progress.MachinesDone, len(machines)-ended+t.laterRuns, strings.Join(failures, "; "), more),
			ErrTypeMachinesFailed, nil)
	}
	return perMachine, nil
}
