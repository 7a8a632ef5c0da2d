package workflows_test

import (
	"net/http"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
)

// TestMigrateMachineRefusedWithoutGrant: when the source refuses the grant (none, forged,
// expired, revoked, for another machine or target: region/server TestMigrateGrants), the
// migration fails in validation and no region is changed (issue 10 item 9).
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
