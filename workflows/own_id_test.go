package workflows_test

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// wantNonCanonicalID checks that err refuses the run's workflow ID, naming what it must be.
func wantNonCanonicalID(t *testing.T, what string, err error, want string) {
	t.Helper()
	if errorType(err) != activities.ErrNonCanonicalWorkID || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want it refused as %s with %q", what, err, activities.ErrNonCanonicalWorkID, want)
	}
}

// A batch runs only as the child its transfer or bulk run names <parent>/batch/<first
// machine>: started alone, under any ID (its canonical-looking one too), it would move
// machines that `migrations list --machine` cannot find (no MachineUuids) and that no parent
// accounts for. It is refused before its one activity.
func TestMigrateMachineBatchRefusesAnotherWorkflowID(t *testing.T) {
	machines := machineUUIDs(3)
	for _, id := range []string{"innocent-looking-id", workflows.MigrateMachineBatchID(workflows.TransferRackID(transferRack), machines[0])} {
		b := newBulkEnv(t, nil, &fakeChildren{duration: oneMinute})
		b.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
		b.env.ExecuteWorkflow(workflows.MigrateMachineBatch, workflows.MigrateMachineBatchInput{SourceRegion: "east", TargetRegion: "west", Machines: machines, Grant: "grant"})
		wantNonCanonicalID(t, id, b.env.GetWorkflowError(), "only a rack transfer or bulk run starts")
		if b.batches != 0 {
			t.Errorf("%s: %d MigrateBatch calls, want none", id, b.batches)
		}
	}
}

// A bulk run runs only as bulk-migrate/<name> (a Schedule's runs with their time appended),
// its continuation too, or it is refused before it selects or moves anything.
func TestBulkMigrateRefusesAnotherWorkflowID(t *testing.T) {
	machines := machineUUIDs(3)
	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Pool: "gold"}}
	continued := in
	continued.Continuation = &workflows.BulkContinuation{After: machines[0]}
	for what, in := range map[string]workflows.BulkMigrateInput{"first run": in, "continuation": continued} {
		children := &fakeChildren{duration: oneMinute}
		b := newBulkEnv(t, machines, children)
		b.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "innocent-looking-id"})
		b.env.ExecuteWorkflow(workflows.BulkMigrate, in)
		wantNonCanonicalID(t, what, b.env.GetWorkflowError(), `"bulk-migrate/<name>"`)
		if b.selects != 0 || b.batches != 0 || len(children.started) != 0 {
			t.Errorf("%s: %d selections, %d batches, children %v; want none", what, b.selects, b.batches, children.started)
		}
	}
}

// A transfer runs only as transfer-rack/<its rack>: a later run's input (a continuation) under
// another ID skips the first run's checks, so the workflow itself refuses it before any step.
func TestTransferRackRefusesAnotherWorkflowID(t *testing.T) {
	continued := transferInput(0)
	continued.Continuation = &workflows.TransferContinuation{}
	for what, in := range map[string]workflows.TransferRackInput{"first run": transferInput(0), "continuation": continued} {
		children := &fakeChildren{duration: oneMinute}
		e := newTransferEnv(t, machineUUIDs(3), children)
		e.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "innocent-looking-id"})
		_, err := e.run(in)
		wantNonCanonicalID(t, what, err, workflows.TransferRackID(transferRack))
		if len(e.acts.recorded()) != 0 || len(children.started) != 0 {
			t.Errorf("%s: calls %v, children %v; want none", what, e.acts.recorded(), children.started)
		}
	}
}
