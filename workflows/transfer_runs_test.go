package workflows_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// runTransferRuns runs TransferRack with in, and then every run it continues as new with, each
// in a fresh test environment over acts and children (before runs each, numbered from 0),
// until a run ends; it returns the last run's environment and error, and the inputs of the
// runs it continued as new with.
func runTransferRuns(t *testing.T, acts *transferActs, children *fakeChildren, in workflows.TransferRackInput, before func(e *transferEnv, run int)) (*transferEnv, error, []workflows.TransferRackInput) {
	t.Helper()
	var continued []workflows.TransferRackInput
	for run := 0; ; run++ {
		if run > 20 {
			t.Fatal("the transfer keeps continuing as new")
		}
		e := newTransferEnvOver(t, acts, children)
		if before != nil {
			before(e, run)
		}
		_, err := e.run(in)
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			return e, err, continued
		}
		if can.WorkflowType.Name != "TransferRack" {
			t.Fatalf("continued as new as %s", can.WorkflowType.Name)
		}
		in = workflows.TransferRackInput{}
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
			t.Fatal(err)
		}
		continued = append(continued, in)
	}
}

// A transfer continues as new once a run has migrated BatchesPerRun batches' worth of
// machines: its continuation carries counts and the last machine it migrated, never the
// machine list, and the transfer completes exactly as in one run.
func TestTransferRackContinuesAsNewAtTheThreshold(t *testing.T) {
	machines := machineUUIDs(10)
	acts := newTransferActs(t, machines)
	acts.batchMoves = true
	acts.batchLeave[machines[5]] = true // a machine of the second run takes the per-machine path
	children := &fakeChildren{duration: oneMinute}
	in := transferInput(0)
	in.MachinesPerBatch, in.BatchesPerRun = 2, 2
	e, err, continued := runTransferRuns(t, acts, children, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.TransferRackResult
	if err := e.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	want := workflows.TransferRackResult{RackName: "rack-a", Machines: 10, Copied: api.RackImport{Fabrics: 1, VLANs: 1, Subnets: 1, Leases: 3, Created: 4}, Released: 2}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if len(continued) != 2 {
		t.Fatalf("continued as new %d times, want 2 (4 machines a run)", len(continued))
	}
	for i, next := range continued {
		c := next.Continuation
		if c == nil || c.After != machines[4*i+3] || c.Progress.MachinesDone != 4*(i+1) || c.Progress.MachinesTotal != 10 || len(c.Plan.Machines) != 0 || c.Result.RackName != "rack-a" {
			t.Errorf("continuation %d: %+v", i, c)
		}
		if next.MachinesPerBatch != 2 || next.BatchesPerRun != 2 {
			t.Errorf("continued with %d machines per batch, %d batches per run", next.MachinesPerBatch, next.BatchesPerRun)
		}
	}
	equal(t, "activities", acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack",
		"RackMachines", "RackMachines", "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"})
	var batched []string
	for _, b := range acts.batches {
		if len(b.Machines) > 2 {
			t.Errorf("batch of %d machines, want at most 2", len(b.Machines))
		}
		batched = append(batched, b.Machines...)
	}
	equal(t, "batched machines", slices.Sorted(slices.Values(batched)), machines)
	equal(t, "per-machine children", children.started, []string{workflows.MigrateMachineID(machines[5])})
	if p := e.progress(); p.Phase != workflows.PhaseCompleted || p.MachinesDone != 10 || p.MachinesTotal != 10 || p.MachinesRunning != 0 {
		t.Errorf("progress %+v", p)
	}
}

// A machine that fails in a later run stops the transfer there and runs the undos of the
// steps the first run took, as a transfer in one run does.
func TestTransferRackFailureInALaterRunCompensates(t *testing.T) {
	machines := machineUUIDs(10)
	acts := newTransferActs(t, machines)
	acts.batchMoves = true
	acts.batchFail[machines[6]] = true
	in := transferInput(1)
	in.MachinesPerBatch, in.BatchesPerRun = 2, 2
	e, err, continued := runTransferRuns(t, acts, &fakeChildren{duration: oneMinute}, in, nil)
	if got := errorType(err); got != workflows.ErrTypeMachinesFailed {
		t.Fatalf("error %v (type %q), want %s", err, got, workflows.ErrTypeMachinesFailed)
	}
	if len(continued) != 1 {
		t.Errorf("continued as new %d times, want once", len(continued))
	}
	equal(t, "activities", acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "RackMachines", "UndoRackCopy", "UnpauseRack"})
	if p := e.progress(); p.Phase != workflows.PhaseFailed || p.MachinesDone != 7 || p.MachinesFailed != 1 || !strings.Contains(p.Errors[len(p.Errors)-1], "(7 moved, 2 not started)") {
		t.Errorf("progress %+v, want 7 moved (the failed batch's other machine too), one failed, two not started", p)
	}
}

// A pause and a window set in one run hold in the next: it starts nothing until resumed, then
// runs at the window set.
func TestTransferRackCarriesControlsAcrossContinueAsNew(t *testing.T) {
	machines := machineUUIDs(8)
	acts := newTransferActs(t, machines) // every machine takes the per-machine path
	children := &fakeChildren{duration: tenMinutes}
	in := transferInput(1)
	in.MachinesPerBatch, in.BatchesPerRun = 2, 2
	var startedWhilePaused int
	var during workflows.TransferProgress
	_, err, continued := runTransferRuns(t, acts, children, in, func(e *transferEnv, run int) {
		switch run {
		case 0:
			control(e.env, time.Minute, workflows.SetWindowUpdate, workflows.ControlRequest{Window: 4, By: "alice"})
			control(e.env, 2*time.Minute, workflows.PauseUpdate, workflows.ControlRequest{By: "alice"})
		case 1:
			e.env.RegisterDelayedCallback(func() { startedWhilePaused, during = children.startedCount(), e.progress() }, time.Hour)
			control(e.env, time.Hour+time.Minute, workflows.ResumeUpdate, workflows.ControlRequest{By: "bob"})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(continued) != 1 || continued[0].Window != 4 || !continued[0].Continuation.Paused {
		t.Fatalf("continued with %+v", continued)
	}
	if startedWhilePaused != 4 || !during.Paused || during.Window != 4 || during.MachinesDone != 4 || during.MachinesRunning != 0 {
		t.Errorf("second run while paused: %d started in all, progress %+v", startedWhilePaused, during)
	}
	if children.maxRunning != 4 || children.startedCount() != len(machines) {
		t.Errorf("%d children at most at once, %d started", children.maxRunning, children.startedCount())
	}
	if !slices.Equal(acts.controls, []string{
		"east transfer-rack/" + transferRack + " set-window 4 by alice",
		"east transfer-rack/" + transferRack + " pause by alice",
		"east transfer-rack/" + transferRack + " resume by bob",
	}) {
		t.Errorf("audits %q", acts.controls)
	}
}

// A transfer cancelled in a later run stops its machines' migrations, which undo their own
// steps, and runs the undos of the steps the first run took.
func TestTransferRackCancelledInALaterRunUndoesTheFirstRunsSteps(t *testing.T) {
	machines := machineUUIDs(8)
	acts := newTransferActs(t, machines) // every machine takes the per-machine path
	children := &fakeChildren{duration: tenMinutes}
	in := transferInput(2)
	in.MachinesPerBatch, in.BatchesPerRun = 2, 2
	e, err, continued := runTransferRuns(t, acts, children, in, func(e *transferEnv, run int) {
		if run == 1 {
			e.env.RegisterDelayedCallback(e.env.CancelWorkflow, 5*time.Minute)
		}
	})
	if !temporal.IsCanceledError(err) {
		t.Fatalf("got %v, want a cancelled transfer", err)
	}
	if len(continued) != 1 {
		t.Errorf("continued as new %d times, want once", len(continued))
	}
	equal(t, "activities", acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "RackMachines", "UndoRackCopy", "UnpauseRack"})
	// The cancel reaches the two machines in flight in the second run: the first pair of its
	// per-machine list, which follows the order in which its two batches returned them.
	canceled := slices.Sorted(slices.Values(children.canceled))
	if !slices.Equal(canceled, machines[4:6]) && !slices.Equal(canceled, machines[6:8]) {
		t.Errorf("machines whose migration saw the cancel %v, want one batch's pair of %v", canceled, machines[4:])
	}
	if p := e.progress(); p.Phase != workflows.PhaseCanceled || p.MachinesDone != 4 {
		t.Errorf("progress %+v", p)
	}
}
