package workflows_test

import (
	"net/http"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// TestMigrateMachineRefusedWithoutGrant: when the source refuses the grant (none, forged,
// expired, revoked, for another machine or target: region/server TestMigrateGrants), the
// migration fails in validation and no region is changed.
func TestMigrateMachineRefusedWithoutGrant(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		f := newFixture(t)
		f.east.Fail("VerifyGrant", code, -1)
		_, err := f.run(input())
		if errorType(err) != activities.ErrGrantRefused {
			t.Fatalf("answer %d: error %v, want %s", code, err, activities.ErrGrantRefused)
		}
		equal(t, "activities", f.activities, []string{"ValidateMigration"})
		equal(t, "region calls", f.journal.Calls(), nil)
		f.assertUntouched()
	}
}

// TestMigrateMachineRefusesOwnWorkflowID: a migration started under any ID but
// migrate-machine/<uuid> is refused before it changes anything.
func TestMigrateMachineRefusesOwnWorkflowID(t *testing.T) {
	f := newFixture(t)
	f.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "my-own-id"})
	_, err := f.run(input())
	if errorType(err) != activities.ErrNonCanonicalWorkID {
		t.Fatalf("error %v, want %s", err, activities.ErrNonCanonicalWorkID)
	}
	equal(t, "region calls", f.journal.Calls(), nil)
	f.assertUntouched()
}

// TestMigrateMachineNamesTheMoveItIsPartOf: a migration's grant check names the root of the
// move it is part of as Temporal reports it, with the root's first run its parent handed down:
// nothing of the kind when it runs alone (its own run instead, whatever its input says), its
// parent when it is a child. The source lets a transfer's or bulk run's children finish under
// the grant that started it (region/server TestAnExpiredGrantStillCoversTheMoveItStarted).
func TestMigrateMachineNamesTheMoveItIsPartOf(t *testing.T) {
	alone := newFixture(t)
	forged := input()
	forged.MoveRun = "forged-run"
	if _, err := alone.run(forged); err != nil {
		t.Fatal(err)
	}
	if checks := alone.east.GrantChecks(); len(checks) != 1 || checks[0].Move != "" || checks[0].MoveRun == forged.MoveRun {
		t.Errorf("grant checks of a migration run alone: %+v, want one naming no other move and its own run", checks)
	}

	child := newFixture(t, migrateBirdyAsChild)
	const parentID = "transfer-rack/test-rack"
	child.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: parentID})
	child.env.ExecuteWorkflow(migrateBirdyAsChild)
	if err := child.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if checks := child.east.GrantChecks(); len(checks) != 1 || checks[0].Move != parentID || checks[0].MoveRun != parentFirstRun {
		t.Errorf("grant checks of a child migration: %+v, want one naming %s, run %s", checks, parentID, parentFirstRun)
	}
}

// parentFirstRun is the first run migrateBirdyAsChild hands its child, as a transfer does.
const parentFirstRun = "parent-first-run"

// migrateBirdyAsChild runs birdy's migration as its child, as a transfer or a bulk run does.
func migrateBirdyAsChild(ctx workflow.Context) error {
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: workflows.MigrateMachineID(birdyUUID)})
	in := input()
	in.MoveRun = parentFirstRun
	return workflow.ExecuteChildWorkflow(ctx, workflows.MigrateMachine, in).Get(ctx, nil)
}
