package moves

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/workflows"
)

// BulkFailures lists every machine the latest bulk run id (every run of its continue-as-new
// chain) failed to migrate, from the children that moved them: the failures a batch's result
// names (every machine of a batch that failed as a whole), and each MigrateMachine child that
// did not complete. A bulk run's own result and progress name the first failures only
// (workflows.BulkMigrateResult); this is the rest. Children still running are left out.
func BulkFailures(ctx context.Context, tc client.Client, id string) ([]workflows.MachineFailure, error) {
	if strings.ContainsAny(id, `'"\`) {
		return nil, fmt.Errorf("%q is not a bulk migration's workflow ID", id)
	}
	start, err := chainStart(ctx, tc, id)
	if err != nil {
		return nil, err
	}
	query := fmt.Sprintf("ParentWorkflowId = '%s' AND StartTime >= '%s' AND ExecutionStatus != 'Running'", id, start.UTC().Format(time.RFC3339Nano))
	failures := []workflows.MachineFailure{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list the children of %s: %w", id, err)
		}
		for _, info := range resp.GetExecutions() {
			f, err := childFailures(ctx, tc, info)
			if err != nil {
				return nil, err
			}
			failures = append(failures, f...)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return failures, nil
		}
	}
}

// chainStart is when the first run of the latest chain of id started: its children start
// after it, those of earlier runs under the same ID before.
func chainStart(ctx context.Context, tc client.Client, id string) (time.Time, error) {
	latest, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return time.Time{}, err
	}
	first := latest.GetWorkflowExecutionInfo()
	if runID := first.GetFirstRunId(); runID != "" && runID != first.GetExecution().GetRunId() {
		desc, err := tc.DescribeWorkflowExecution(ctx, id, runID)
		if err != nil {
			return time.Time{}, fmt.Errorf("first run %s of %s: %w", runID, id, err)
		}
		first = desc.GetWorkflowExecutionInfo()
	}
	return first.GetStartTime().AsTime(), nil
}

// childFailures are the machines a closed child of a bulk run did not migrate.
func childFailures(ctx context.Context, tc client.Client, info *workflowpb.WorkflowExecutionInfo) ([]workflows.MachineFailure, error) {
	run := runOf(info)
	completed := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	switch run.Type {
	case Batch.Type():
		var res activities.BatchResult
		err := tc.GetWorkflow(ctx, run.WorkflowID, run.RunID).Get(ctx, &res)
		if completed && err != nil {
			return nil, fmt.Errorf("result of batch %s: %w", run.WorkflowID, err)
		}
		var failures []workflows.MachineFailure
		if err != nil {
			for _, m := range batchMachines(info) {
				failures = append(failures, workflows.MachineFailure{Machine: m, Error: FailureMessage(err)})
			}
		}
		for _, f := range res.Failed {
			failures = append(failures, workflows.MachineFailure{Machine: f.Machine, Error: f.Error})
		}
		return failures, nil
	case Migration.Type():
		if completed {
			return nil, nil
		}
		err := tc.GetWorkflow(ctx, run.WorkflowID, run.RunID).Get(ctx, nil)
		msg := run.Status
		if err != nil {
			msg = FailureMessage(err)
		}
		return []workflows.MachineFailure{{Machine: run.MachineUuid, Error: msg}}, nil
	}
	return nil, nil
}

// batchMachines are the machines of a batch, from its MachineUuids search attribute.
func batchMachines(info *workflowpb.WorkflowExecutionInfo) []string {
	var machines []string
	if p := info.GetSearchAttributes().GetIndexedFields()[workflows.MachineUuidsKey.GetName()]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &machines)
	}
	return machines
}
