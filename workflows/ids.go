// Package workflows holds Ironflow's Temporal workflows. Workflow code is deterministic: it
// reads time with workflow.Now, sleeps with workflow.Sleep and talks to regions only through
// activities.
package workflows

import (
	"fmt"
	"strings"

	"github.com/ironflow/ironflow/activities"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Task queues.
const (
	// TaskQueue is polled by `ironflow worker` for the orchestration workflows and activities.
	TaskQueue = "ironflow"
	// ProgressQuery is the query that returns a workflow's Progress.
	ProgressQuery = "progress"
)

// MigrateMachineID is the workflow ID of the migration of one machine; one ID per machine is
// what refuses a second migration of the same machine while one runs.
func MigrateMachineID(machineUUID string) string { return activities.MigrateMachineID(machineUUID) }

// TransferRackID is the workflow ID of the transfer of one rack.
func TransferRackID(rackUUID string) string { return activities.TransferRackID(rackUUID) }

// MigrateMachineBatchID is the workflow ID of the batch of a transfer or bulk run (the
// workflow ID parent) whose first machine is first.
func MigrateMachineBatchID(parent, first string) string { return parent + "/batch/" + first }

// bulkMigrateIDFor is the canonical bulk run ID closest to id: id itself when it names a bulk
// run (BulkMigrateID of a name; a Schedule's runs append their time to it), else the form
// to start one under.
func bulkMigrateIDFor(id string) string {
	if name, ok := strings.CutPrefix(id, BulkMigrateID("")); ok && name != "" {
		return id
	}
	return BulkMigrateID("<name>")
}

// ownIDChange is the GetVersion change ID of checkOwnID; runs recorded before it check
// nothing of their own ID.
const ownIDChange = "own-workflow-id"

// checkOwnID refuses, before the run changes anything, a run whose workflow ID is not want,
// the canonical one of its subject ("": the run has none): one ID per subject is what refuses
// a second move of the same machine or rack, or a second pod operation on the same subject,
// while one runs, and what `migrations list` and `show` find a move by. MigrateMachine's first
// activity makes the same check (activities.ErrNonCanonicalWorkID).
func checkOwnID(ctx workflow.Context, what, want string) error {
	if workflow.GetVersion(ctx, ownIDChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	if id == want {
		return nil
	}
	hint := "no workflow ID is its own"
	if want != "" {
		hint = fmt.Sprintf("it must run as %q", want)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s runs as workflow %q; %s", what, id, hint), activities.ErrNonCanonicalWorkID, nil)
}

// MigrateMachineStartOptions are the options to start MigrateMachine for a machine UUID
// (resolve a Name:x key first): a running migration of the same machine makes the start fail.
func MigrateMachineStartOptions(machineUUID string) client.StartWorkflowOptions {
	return startOptions(MigrateMachineID(machineUUID))
}

// TransferRackStartOptions are the options to start TransferRack for a rack UUID: a running
// transfer of the same rack makes the start fail.
func TransferRackStartOptions(rackUUID string) client.StartWorkflowOptions {
	return startOptions(TransferRackID(rackUUID))
}

// moveOf names the move ctx's workflow is part of for its grant checks (api.GrantCheck.Move
// and MoveRun): the root workflow's ID, as the Temporal server reports it (a workflow's input
// cannot), and the first run of the root's chain, which the parent handed down as moveRun;
// nothing when the workflow is the root, whatever its input says.
func moveOf(ctx workflow.Context, moveRun string) (move, run string) {
	root := workflow.GetInfo(ctx).RootWorkflowExecution
	if root == nil {
		return "", ""
	}
	return root.ID, moveRun
}

// moveRunOf is what a transfer or bulk run hands its children as their MoveRun: the first
// run of its chain, which continue-as-new keeps and which its own grant check recorded.
func moveRunOf(ctx workflow.Context) string { return workflow.GetInfo(ctx).FirstRunID }

// Pod workflow IDs: one compose per VM name of a pod, one refresh per pod, one decompose
// and one power action per machine at a time.
func PodComposeID(pod, vmName string) string { return "pod-compose/" + pod + "/" + vmName }
func PodRefreshID(pod string) string         { return "pod-refresh/" + pod }
func PodDecomposeID(machine string) string   { return "pod-decompose/" + machine }
func PodPowerID(machine string) string       { return "pod-power/" + machine }

// PodStartOptions are the options to start a pod workflow under id (one of the Pod…ID): a
// running one of the same id makes the start fail.
func PodStartOptions(id string) client.StartWorkflowOptions { return startOptions(id) }

// startOptions start a move with workflow ID id, refusing while a run of id is open; a
// closed run of id does not block a new move of the same subject.
func startOptions(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
}

// startMigrateMachine starts in as a child MigrateMachine of the calling workflow. Children
// are cancelled, never terminated, when their parent closes, so each one undoes its steps or
// finishes its move; the parent waits for a cancelled child to do so.
func startMigrateMachine(ctx workflow.Context, in MigrateMachineInput) workflow.ChildWorkflowFuture {
	return workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, migrateMachineChildOptions(in)), MigrateMachine, in)
}

func migrateMachineChildOptions(in MigrateMachineInput) workflow.ChildWorkflowOptions {
	return workflow.ChildWorkflowOptions{
		WorkflowID:            MigrateMachineID(in.Machine),
		TaskQueue:             TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			MachineUuidKey.ValueSet(in.Machine), SourceRegionKey.ValueSet(in.SourceRegion), TargetRegionKey.ValueSet(in.TargetRegion)),
	}
}
