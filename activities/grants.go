package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/ironflow/ironflow/region/api"
)

// Who may start a move (region/api/grants.go): a workflow carries a grant the source region
// issued to an operator or admin, and its validation has the source verify that the grant
// covers this move before anything changes. The source audits the move with who started it.

// Application error types of the authorisation of a move.
const (
	ErrGrantRefused       = "GrantRefused"
	ErrNonCanonicalWorkID = "NonCanonicalWorkflowID"
)

// MigrateMachineID is the canonical workflow ID of the migration of one machine; the
// workflows package names it too. A migration under any other ID is refused: `migrations
// show` could not find it and a second start for the same machine would not be refused.
func MigrateMachineID(machineUUID string) string { return "migrate-machine/" + machineUUID }

// TransferRackID is the canonical workflow ID of the transfer of one rack, and of the
// recovery of what a closed transfer left (transfer_recovery.go): one ID per rack is what
// keeps a second transfer, or a recovery, from running beside one.
func TransferRackID(rackUUID string) string { return "transfer-rack/" + rackUUID }

// GrantVerifier is the source region's check of a grant; ClientRegion implements it.
type GrantVerifier interface {
	VerifyGrant(ctx context.Context, req api.GrantCheck) (api.GrantClaims, error)
}

// verifyGrant asks the source region whether grant covers moving kind/key to target, and
// returns who the grant was issued to. A refusal is final. A root's own check names its run,
// as Temporal reports it, so the source can tell its children from a later move's.
func verifyGrant(ctx context.Context, src GrantVerifier, source string, check api.GrantCheck) (string, error) {
	if check.Move == "" && activity.IsActivity(ctx) {
		check.MoveRun = activity.GetInfo(ctx).WorkflowExecution.RunID
	}
	claims, err := src.VerifyGrant(ctx, check)
	if isFinal(err) {
		return "", nonRetryable(ErrGrantRefused, "region %s refused the grant to move %s %s to %s: %v "+
			"(ask %s for a grant as an operator or admin, e.g. `ironflow machines migrateGrant KEY --to %s`, and pass it as Grant)",
			source, check.Kind, check.Key, check.TargetRegion, err, source, check.TargetRegion)
	}
	if err != nil {
		return "", classify(err, "verify the grant on %s", source)
	}
	return claims.GrantedTo, nil
}

// workflowID is the ID of the workflow running the activity, for the audit log; "" when ctx
// is not an activity's (a direct call in a test).
func workflowID(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).WorkflowExecution.ID
}
