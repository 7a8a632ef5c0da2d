package workflows_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// The batched path: the machines go in batches of 50 as MigrateMachineBatch children, each
// holding its machines under its own ID; the machines a batch leaves (agent, ESXi, running
// job) then take a MigrateMachine child each, and nothing else does.
func TestTransferRackBatchedPath(t *testing.T) {
	machines := machineUUIDs(120)
	children := &fakeChildren{duration: oneMinute}
	e := newTransferEnv(t, machines, children)
	e.acts.batchMoves = true
	e.acts.batchLeave[machines[7]], e.acts.batchLeave[machines[101]] = true, true
	res, err := e.run(transferInput(0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Machines != 120 {
		t.Errorf("result %+v", res)
	}
	equal(t, "activities", e.acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"})
	var sizes []int
	var batched []string
	for _, b := range e.acts.batches {
		sizes = append(sizes, len(b.Machines))
		batched = append(batched, b.Machines...)
		// The test environment's workflow ID is not the transfer's.
		if want := "/batch/" + b.Machines[0]; !strings.HasSuffix(b.Migration, want) || b.SourceRegion != "east" || b.TargetRegion != "west" {
			t.Errorf("batch %s from %s to %s, want migration <transfer>%s from east to west", b.Migration, b.SourceRegion, b.TargetRegion, want)
		}
	}
	slices.Sort(sizes)
	equal(t, "batch sizes", sizes, []int{20, 50, 50})
	equal(t, "batched machines", slices.Sorted(slices.Values(batched)), slices.Sorted(slices.Values(machines)))
	equal(t, "per-machine children", slices.Sorted(slices.Values(children.started)),
		[]string{workflows.MigrateMachineID(machines[7]), workflows.MigrateMachineID(machines[101])})
	if p := e.progress(); p.MachinesDone != 120 || p.MachinesFailed != 0 {
		t.Errorf("progress %+v", p)
	}
}

// A machine that fails in a batch fails the transfer: no batch starts after it, no machine
// takes the per-machine path, the rack's steps are undone, and the failure names the machine.
func TestTransferRackBatchFailureStops(t *testing.T) {
	machines := machineUUIDs(250)
	children := &fakeChildren{duration: oneMinute}
	e := newTransferEnv(t, machines, children)
	e.acts.batchMoves = true
	e.acts.batchFail[machines[3]] = true
	e.acts.batchLeave[machines[4]] = true
	// Window 1: one batch at a time, so which batches may have started before the failure
	// came back does not depend on which of two running batches the test's worker ends first.
	_, err := e.run(transferInput(1))
	if got := errorType(err); got != workflows.ErrTypeMachinesFailed {
		t.Fatalf("error %v (type %q), want %s", err, got, workflows.ErrTypeMachinesFailed)
	}
	equal(t, "activities", e.acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "UndoRackCopy", "UnpauseRack"})
	n := len(e.acts.batches)
	if n != 1 {
		t.Errorf("%d of 5 batches ran, want none started after the failed first one", n)
	}
	if len(children.started) != 0 {
		t.Errorf("per-machine children %v started after a failed batch", children.started)
	}
	p := e.progress()
	if p.MachinesFailed != 1 || p.MachinesDone != 50*n-2 || !slices.ContainsFunc(p.Errors, func(s string) bool {
		return s == "machine "+machines[3]+": machine "+machines[3]+" refused by the target"
	}) {
		t.Errorf("progress %+v", p)
	}
}

// The failures a transfer keeps are a bounded sample.
func TestTransferRackKeepsABoundedFailureSample(t *testing.T) {
	machines := machineUUIDs(100)
	e := newTransferEnv(t, machines, &fakeChildren{duration: oneMinute})
	e.acts.batchMoves = true
	for _, m := range machines {
		e.acts.batchFail[m] = true
	}
	if _, err := e.run(transferInput(0)); err == nil {
		t.Fatal("transfer succeeded")
	}
	if p := e.progress(); p.MachinesFailed != 100 || len(p.Errors) > 25 {
		t.Errorf("progress: %d failed, %d errors kept; want 100 failed and a sample of errors", p.MachinesFailed, len(p.Errors))
	}
}

// A bulk run on the batched path records each machine's outcome from its batch; a failed
// machine does not stop the others, and only the machines a batch leaves take a child.
func TestBulkMigrateBatchedPath(t *testing.T) {
	machines := machineUUIDs(120)
	children := &fakeChildren{duration: oneMinute}
	b := newBulkEnv(t, machines, children)
	b.batch = func(in activities.BatchInput) activities.BatchResult {
		var res activities.BatchResult
		for _, m := range in.Machines {
			switch m {
			case machines[3]:
				res.Failed = append(res.Failed, activities.BatchFailure{Machine: m, Error: "refused", Undone: true})
			case machines[60]:
				res.PerMachine = append(res.PerMachine, m)
			default:
				res.Moved = append(res.Moved, m)
			}
		}
		return res
	}
	res, err := b.run(workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Pool: "gold"}})
	if err != nil {
		t.Fatal(err)
	}
	if b.batches != 3 || res.Migrated != 119 || !slices.Equal(res.Failed, []workflows.MachineFailure{{Machine: machines[3], Error: "refused"}}) {
		t.Errorf("%d batches, result: %d succeeded, failed %+v; want 3 batches, 119 moved, %s refused", b.batches, res.Migrated, res.Failed, machines[3])
	}
	equal(t, "per-machine children", children.started, []string{workflows.MigrateMachineID(machines[60])})
	if p := b.progress(); p.Done != 119 || p.Failed != 1 || p.Running != 0 {
		t.Errorf("progress %+v", p)
	}
}
