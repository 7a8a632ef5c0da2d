package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
)

// The machine phase of TransferRack in runs: a run migrates at most BatchesPerRun
// batches' worth of machines, in UUID order, then continues as new with what it must keep —
// the plan without its machines, counts, a bounded sample of errors, the operator's controls
// and the last machine it migrated — so its history stays bounded for racks of any size. The
// next run asks the source for the rack's machines after that one: machines already moved
// are stubs there and are not listed. The undos of the pause and the copy, taken by the first
// run, stay due in every later one.

// transferRunsChange is the GetVersion change ID of the machine phase in runs; runs recorded
// before it migrate every machine in one run.
const transferRunsChange = "transfer-machine-phase-can"

// DefaultTransferBatchesPerRun is how many batches' worth of machines one run of TransferRack
// migrates when the input says nothing: 500 machines at the default batch size, a run of a
// few thousand events.
const DefaultTransferBatchesPerRun = 10

// TransferContinuation carries a transfer across continue-as-new during its machine phase.
type TransferContinuation struct {
	Plan     activities.TransferPlan // without its Machines
	Result   TransferRackResult
	Progress TransferProgress // counts and at most maxFailureSample errors, each truncated
	// After is the last machine, in UUID order, the earlier runs migrated.
	After string
	// JobsDeadline ends the wait for running jobs (rackTransfer.jobsDeadline).
	JobsDeadline time.Time `json:",omitzero"`
	// Paused is an operator's pause (PauseUpdate) the next run keeps; the window an operator
	// set (SetWindowUpdate) is the next run's Window.
	Paused bool `json:",omitempty"`
}

func (in TransferRackInput) machinesPerRun() int {
	runs := in.BatchesPerRun
	if runs == 0 {
		runs = DefaultTransferBatchesPerRun
	}
	return runs * batchSize(in.MachinesPerBatch)
}

// resume takes over what the earlier runs of the transfer did.
func (t *rackTransfer) resume(ctx workflow.Context, c *TransferContinuation) error {
	t.plan, t.result, t.progress, t.after, t.jobsDeadline = c.Plan, c.Result, c.Progress, c.After, c.JobsDeadline
	t.ctl.state.Paused = c.Paused
	t.progress.Phase = PhaseMigratingMachines
	return upsertStartedBy(ctx, t.plan.StartedBy)
}

// migrateThisRun migrates this run's share of the machines, on the batched path and then, for
// those the batches leave, per machine. When machines are left after its share, it sets
// nextAfter: the transfer continues as new.
func (t *rackTransfer) migrateThisRun(ctx workflow.Context) error {
	perRun := t.in.machinesPerRun()
	machines, err := t.machinesAfter(ctx, perRun+1)
	if err != nil {
		return err
	}
	more := len(machines) > perRun
	machines = machines[:min(len(machines), perRun)]
	t.laterRuns = max(0, t.progress.MachinesTotal-t.progress.MachinesDone-len(machines))
	perMachine, err := t.migrateBatches(ctx, machines)
	if err != nil {
		return err
	}
	if len(perMachine) > 0 {
		if err := t.migrateEach(ctx, perMachine); err != nil {
			return err
		}
	}
	if more {
		t.nextAfter = machines[len(machines)-1]
	}
	return nil
}

// machinesAfter returns up to limit machines of the rack after t.after, in UUID order: the
// first run's from its plan, a later run's as the source lists them now.
func (t *rackTransfer) machinesAfter(ctx workflow.Context, limit int) ([]string, error) {
	if t.in.Continuation == nil {
		machines := slices.Sorted(slices.Values(t.plan.Machines))
		return machines[:min(len(machines), limit)], nil
	}
	var machines []string
	in := activities.RackMachinesInput{Region: t.in.SourceRegion, Rack: t.in.Rack, After: t.after, Limit: limit}
	err := call(ctx, regionCallOptions, acts.RackMachines, in, &machines)
	return machines, err
}

// continueAsNew ends this run once its control Updates finished, and continues the transfer
// in a new run with the machines after t.nextAfter.
func (t *rackTransfer) continueAsNew(ctx workflow.Context) (TransferRackResult, error) {
	t.ctl.finish(ctx)
	next := t.in
	next.Window = t.ctl.windowOr(t.in.Window)
	plan := t.plan
	plan.Machines = nil
	p := t.progress
	p.MachinesRunning, p.Paused, p.Window = 0, false, 0
	p.Errors = nil
	for _, e := range t.progress.Errors[:min(len(t.progress.Errors), maxFailureSample)] {
		p.Errors = append(p.Errors, truncated(e))
	}
	next.Continuation = &TransferContinuation{Plan: plan, Result: t.result, Progress: p, After: t.nextAfter, JobsDeadline: t.jobsDeadline, Paused: t.ctl.state.Paused}
	return TransferRackResult{}, workflow.NewContinueAsNewError(ctx, TransferRack, next)
}
