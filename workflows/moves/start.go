package moves

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workflows"
)

// AlreadyRunningError is a start refused because a run of the same workflow ID, the same
// subject, is open.
type AlreadyRunningError struct {
	ID    string // the workflow ID
	RunID string // the open run
}

func (e *AlreadyRunningError) Error() string {
	return e.ID + " is already running (run " + e.RunID + ")"
}

// StartMigration starts the migration in of one machine (in.Machine is its UUID).
func StartMigration(ctx context.Context, tc client.Client, in workflows.MigrateMachineInput) (client.WorkflowRun, error) {
	opts := workflows.MigrateMachineStartOptions(in.Machine)
	opts.TypedSearchAttributes = temporal.NewSearchAttributes(
		workflows.MachineUuidKey.ValueSet(in.Machine),
		workflows.SourceRegionKey.ValueSet(in.SourceRegion),
		workflows.TargetRegionKey.ValueSet(in.TargetRegion),
	)
	return start(ctx, tc, opts, in.Grant, Migration.Workflow, in)
}

// StartTransfer starts the transfer in of one rack.
func StartTransfer(ctx context.Context, tc client.Client, in workflows.TransferRackInput) (client.WorkflowRun, error) {
	opts := workflows.TransferRackStartOptions(in.Rack)
	opts.TypedSearchAttributes = temporal.NewSearchAttributes(
		workflows.RackUuidKey.ValueSet(in.Rack),
		workflows.SourceRegionKey.ValueSet(in.SourceRegion),
		workflows.TargetRegionKey.ValueSet(in.TargetRegion),
	)
	return start(ctx, tc, opts, in.Grant, Transfer.Workflow, in)
}

// StartBulk starts the bulk migration in, called name (CheckName).
func StartBulk(ctx context.Context, tc client.Client, name string, in workflows.BulkMigrateInput) (client.WorkflowRun, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	opts := workflows.BulkMigrateStartOptions(name)
	opts.TypedSearchAttributes = bulkSearchAttributes(in)
	return start(ctx, tc, opts, in.Grant, Bulk.Workflow, in)
}

// StartRecovery starts the recovery in of a rack under the rack's transfer ID, so a transfer
// (or a recovery) of the rack that still runs refuses it.
func StartRecovery(ctx context.Context, tc client.Client, in workflows.RecoverRackInput) (client.WorkflowRun, error) {
	opts := workflows.TransferRackStartOptions(in.Rack)
	opts.TypedSearchAttributes = temporal.NewSearchAttributes(workflows.RackUuidKey.ValueSet(in.Rack))
	opts.Memo = map[string]any{workflows.MemoStartedBy: in.StartedBy}
	return startWithMemo(ctx, tc, opts, workflows.RecoverRackTransfer, in)
}

// start starts a move with opts, recording who its grant names in its memo.
func start(ctx context.Context, tc client.Client, opts client.StartWorkflowOptions, grant string, workflow, in any) (client.WorkflowRun, error) {
	opts.Memo = startedByMemo(grant)
	return startWithMemo(ctx, tc, opts, workflow, in)
}

// startWithMemo starts workflow with opts, naming the open run of the same ID when refused.
func startWithMemo(ctx context.Context, tc client.Client, opts client.StartWorkflowOptions, workflow, in any) (client.WorkflowRun, error) {
	run, err := tc.ExecuteWorkflow(ctx, opts, workflow, in)
	var running *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &running) {
		return nil, &AlreadyRunningError{ID: opts.ID, RunID: running.RunId}
	}
	return run, err
}

// bulkSearchAttributes let `temporal workflow list` find bulk migrations by region.
func bulkSearchAttributes(in workflows.BulkMigrateInput) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(workflows.SourceRegionKey.ValueSet(in.SourceRegion), workflows.TargetRegionKey.ValueSet(in.TargetRegion))
}

// startedByMemo records who a grant was issued to in the workflow's memo.
func startedByMemo(grant string) map[string]any {
	c, err := tickets.ParseGrant(grant)
	if err != nil || c.GrantedTo == "" {
		return nil
	}
	return map[string]any{workflows.MemoStartedBy: c.GrantedTo}
}

// CheckName refuses names that would make odd workflow and schedule IDs.
func CheckName(name string) error {
	if name == "" || strings.ContainsAny(name, "/ \t\n") {
		return fmt.Errorf("name %q must be non-empty, without spaces or slashes", name)
	}
	return nil
}
