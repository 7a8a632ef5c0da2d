// Package workflows holds Ironflow's Temporal workflows. Workflow code is deterministic: it
// reads time with workflow.Now, sleeps with workflow.Sleep and talks to regions only through
// activities.
package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
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
func MigrateMachineID(machineUUID string) string { return "migrate-machine/" + machineUUID }

// TransferRackID is the workflow ID of the transfer of one rack.
func TransferRackID(rackUUID string) string { return "transfer-rack/" + rackUUID }

// MigrateMachineStartOptions are the options to start MigrateMachine for a machine UUID
// (resolve a Name:x key first): a running migration of the same machine makes the start fail.
func MigrateMachineStartOptions(machineUUID string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       MigrateMachineID(machineUUID),
		TaskQueue:                                TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
}
