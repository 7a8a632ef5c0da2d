package workflows

import (
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
)

// The batched path of TransferRack (issue 13): a MigrateMachineBatch child moves up to
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
	batchesAtOnce    = 2
)

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
	batch := activities.BatchInput{
		SourceRegion: in.SourceRegion, TargetRegion: in.TargetRegion, Machines: in.Machines, Grant: in.Grant,
		Migration: workflow.GetInfo(ctx).WorkflowExecution.ID,
	}
	err := call(ctx, batchOptions, acts.MigrateBatch, batch, &res)
	return res, err
}

// batchChildOptions start the batch of machines as a child of the workflow whose ID is
// parent: one ID per batch (its first machine), cancelled with its parent, its machines and
// regions in its search attributes from the start.
func batchChildOptions(parent string, in MigrateMachineBatchInput) workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:            parent + "/batch/" + in.Machines[0],
		TaskQueue:             TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			MachineUuidsKey.ValueSet(in.Machines), SourceRegionKey.ValueSet(in.SourceRegion), TargetRegionKey.ValueSet(in.TargetRegion)),
	}
}

// batches cuts machines into batches of at most machinesPerBatch, in order.
func batches(machines []string) [][]string {
	var out [][]string
	for len(machines) > 0 {
		n := min(len(machines), machinesPerBatch)
		out = append(out, machines[:n])
		machines = machines[n:]
	}
	return out
}

// migrateBatches moves the plan's machines in MigrateMachineBatch children, at most
// batchesAtOnce at a time, and returns the machines that need the per-machine path. After a
// batch with a failure it starts no more batches, waits for the running ones and fails.
func (t *rackTransfer) migrateBatches(ctx workflow.Context) ([]string, error) {
	// The canonical ID of the transfer (not its own, which a replayer does not know).
	parent := TransferRackID(t.in.Rack)
	var perMachine, failures []string
	failed, started := 0, 0
	runWindowed(ctx, batches(t.plan.Machines), batchesAtOnce, func() bool { return failed == 0 },
		func(ctx workflow.Context, machines []string) workflow.Future {
			started += len(machines)
			in := MigrateMachineBatchInput{SourceRegion: t.in.SourceRegion, TargetRegion: t.in.TargetRegion, Machines: machines, Grant: t.in.Grant}
			return workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, batchChildOptions(parent, in)), MigrateMachineBatch, in)
		},
		func(machines []string, f workflow.Future) {
			var res activities.BatchResult
			if err := f.Get(ctx, &res); err != nil {
				// The batch itself failed (e.g. a region unknown to the worker): none of its
				// machines is known to have moved.
				res = activities.BatchResult{}
				for _, m := range machines {
					res.Failed = append(res.Failed, activities.BatchFailure{Machine: m, Error: err.Error()})
				}
			}
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
			more = fmt.Sprintf(" (and %d more, in the results of the batches %s/batch/*)", failed-len(failures), parent)
		}
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%d of %d machines failed to migrate (%d moved, %d not started): %s%s", failed, len(t.plan.Machines),
				t.progress.MachinesDone, len(t.plan.Machines)-started, strings.Join(failures, "; "), more),
			ErrTypeMachinesFailed, nil)
	}
	return perMachine, nil
}
