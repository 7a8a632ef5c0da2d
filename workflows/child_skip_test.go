package workflows_test

import (
	"strings"
	"testing"

	"github.com/ironflow/ironflow/workflows"
)

// A machine of the rack that another migration is moving (its child cannot start) is
// reported skipped, not failed; the rack cannot move away from it, so the transfer stops
// before its repoint and undoes its copy.
func TestTransferRackReportsBusyMachineSkipped(t *testing.T) {
	machines := machineUUIDs(2)
	e := newTransferEnv(t, []string{machines[0], machines[0], machines[1]}, &fakeChildren{duration: staggered})
	_, err := e.run(transferInput(3))
	want := "skipped (already migrating, workflow ID " + workflows.MigrateMachineID(machines[0]) + ")"
	if errorType(err) != workflows.ErrTypeMachinesFailed || !strings.Contains(err.Error(), "0 of 3 machines failed to migrate, 1 skipped") || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want the busy machine reported %q", err, want)
	}
	if p := e.progress(); p.MachinesSkipped != 1 || p.MachinesFailed != 0 {
		t.Errorf("progress %+v, want 1 skipped and none failed", p)
	}
	equal(t, "activities", e.acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "UndoRackCopy", "UnpauseRack"})
}
