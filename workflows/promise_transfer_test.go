package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/ironflow/ironflow/activities"
	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/workflows"
)

// A machine of the rack migrated directly to the transfer's target meanwhile is where the
// transfer wants it: its child's AlreadyMigrated counts as done. Migrated elsewhere, it fails.
func TestTransferRackChildAlreadyOnTarget(t *testing.T) {
	for _, c := range []struct {
		name    string
		to      string
		wantErr string
	}{
		{"on the target", "https://west.example:5240", ""},
		{"on another region", "https://north.example:5240", workflows.ErrTypeMachinesFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			machines := machineUUIDs(3)
			children := &fakeChildren{duration: oneMinute, migratedTo: map[string]string{machines[1]: c.to}}
			e := newTransferEnv(t, machines, children)
			_, err := e.run(transferInput(0))
			if got := errorType(err); got != c.wantErr {
				t.Fatalf("error type %q, want %q: %v", got, c.wantErr, err)
			}
			if c.wantErr != "" {
				return
			}
			equal(t, "activities", e.acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"})
			if p := e.progress(); p.MachinesDone != 3 || p.MachinesFailed != 0 {
				t.Errorf("progress %+v", p)
			}
		})
	}
}

// Once the rack serves from the target, a cancel no longer undoes anything: the hand-over
// and the release of the queued operations finish, and the transfer completes.
func TestTransferRackCancelAfterRepointCompletes(t *testing.T) {
	for _, step := range []string{"HandOverRack", "ReleaseRack"} {
		t.Run(step, func(t *testing.T) {
			e := newTransferEnv(t, machineUUIDs(1), &fakeChildren{duration: oneMinute})
			var slowDone bool
			switch step {
			case "HandOverRack":
				e.env.OnActivity(e.acts.HandOverRack, mock.Anything, mock.Anything).After(time.Hour).Return(func(context.Context, activities.RackRef) error { slowDone = true; return nil })
			case "ReleaseRack":
				e.env.OnActivity(e.acts.ReleaseRack, mock.Anything, mock.Anything).After(time.Hour).Return(func(context.Context, activities.TransferInput) (activities.ReleaseResult, error) {
					slowDone = true
					return activities.ReleaseResult{}, nil
				})
			}
			e.env.RegisterDelayedCallback(e.env.CancelWorkflow, 10*time.Minute)
			if _, err := e.run(transferInput(0)); err != nil {
				t.Fatalf("transfer cancelled after the repoint: %v, want it completed", err)
			}
			if !slowDone {
				t.Errorf("%s did not finish", step)
			}
			if e.phases[len(e.phases)-1] != workflows.PhaseCompleted {
				t.Errorf("phases %v", e.phases)
			}
		})
	}
}

// A repoint whose answer was lost, on a rack that cannot say where it is, undoes nothing:
// undoing the copy could pull the network from under a rack serving from the target.
func TestTransferRackUnknownRackStateUndoesNothing(t *testing.T) {
	e := newTransferEnv(t, machineUUIDs(1), &fakeChildren{duration: oneMinute})
	e.acts.fail["SwapRegionEndpoints"] = true
	e.env.OnActivity("ReportState", mock.Anything).Return(rackacts.State{}, errors.New("rack unreachable"))
	_, err := e.run(transferInput(0))
	if got := errorType(err); got != workflows.ErrRackStateUnknown {
		t.Fatalf("error type %q: %v", got, err)
	}
	equal(t, "activities", e.acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "SwapRegionEndpoints"})
}
