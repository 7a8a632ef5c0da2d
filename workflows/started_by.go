package workflows

import "go.temporal.io/sdk/workflow"

// MemoStartedBy is the memo naming who started a move: the user the source region issued the
// move's grant to. The CLI sets it at the start; the workflow sets it again from the grant its
// validation verified, so a start through the Temporal CLI, which sets no memo, shows it too.
const MemoStartedBy = "StartedBy"

// startedByChange is the GetVersion change ID of the memo upsert after validation.
const startedByChange = "started-by-memo"

// upsertStartedBy records who in the memo, once the grant that names them has been verified.
func upsertStartedBy(ctx workflow.Context, who string) error {
	if workflow.GetVersion(ctx, startedByChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion || who == "" {
		return nil
	}
	return workflow.UpsertMemo(ctx, map[string]any{MemoStartedBy: who})
}
