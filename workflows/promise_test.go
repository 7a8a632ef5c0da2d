package workflows_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// A cancel during DeleteStub, after activation committed the move, finishes the step and
// reports the migration completed.
func TestMigrateMachineCancelDuringDeleteStubCompletes(t *testing.T) {
	f := newFixture(t)
	f.env.OnActivity(a.DeleteStub, mock.Anything, mock.Anything).After(time.Hour).Return(func(ctx context.Context, ref activities.MachineRef) error {
		return f.east.DeleteMachine(ctx, ref.Machine, ref.Migration)
	})
	f.env.RegisterDelayedCallback(f.env.CancelWorkflow, time.Minute)
	in := input()
	in.SkipMachineDestroy = new(false)
	res, err := f.run(in)
	if err != nil {
		t.Fatalf("want a completed migration, got %v", err)
	}
	if !res.StubDeleted {
		t.Error("result does not report the stub deletion")
	}
	f.assertMigrated(true)
	if p := f.progress(); p.Phase != workflows.PhaseCompleted {
		t.Errorf("progress %+v", p)
	}
}

// The source record is deleted while the agent is awaited. The undo of
// the copy must not remove the last copy: the workflow stops undoing, activates the copy on
// the target and says so.
func TestMigrateMachineSourceDeletedKeepsLastCopy(t *testing.T) {
	f := newFixture(t)
	f.withAgent(func(ctx context.Context, _ activities.AgentWaitInput) error {
		f.east.Delete(u) // behind the region's back, as a DELETE in its database would
		return temporal.NewNonRetryableApplicationError("agent did not check in", activities.ErrTypeAgentCheckInTimeout, nil)
	})
	_, err := f.run(input())
	if typ := errorType(err); typ != workflows.ErrTypeCompensationFailed || !strings.Contains(err.Error(), "machine "+u+" is active on west") {
		t.Fatalf("error %q: %v", typ, err)
	}
	equal(t, "activities", f.activities, []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "WaitForAgentCheckIn", "RestoreMigration", "Activate"})
	m, ok := f.west.Machine(u)
	if !ok || !m.Runnable {
		t.Errorf("target copy %+v (present %v), want it active", m, ok)
	}
	if got := len(f.west.Jobs(u)); got != 2 {
		t.Errorf("target has %d jobs, want 2", got)
	}
}

// No ticket minted by the workflow enters history: no MintTicket result,
// and the copy's input carries none (ExportImport mints it on the target itself).
func TestMigrateMachineTicketNeverInHistory(t *testing.T) {
	f := newFixture(t)
	var copyInputs []activities.CopyInput
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		f.activities = append(f.activities, info.ActivityType.Name)
		if info.ActivityType.Name == "ExportImport" {
			var in activities.CopyInput
			if err := args.Get(&in); err != nil {
				t.Error(err)
			}
			copyInputs = append(copyInputs, in)
		}
	})
	if _, err := f.run(input()); err != nil {
		t.Fatal(err)
	}
	f.assertMigrated(false)
	if slices.Contains(f.activities, "MintTicket") {
		t.Errorf("activities %v: the workflow minted a ticket", f.activities)
	}
	if len(copyInputs) != 1 || copyInputs[0].Ticket != "" {
		t.Errorf("copy inputs %+v, want one without a ticket", copyInputs)
	}
	if got := f.journal.Calls(); !slices.Contains(got, "west MintTicket") {
		t.Errorf("region calls %v: the copy did not mint its ticket on the target", got)
	}
}
