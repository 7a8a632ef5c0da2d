package workflows_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// TestWorkflowsRefuseAnotherIDOnDevServer starts, from a client as the Temporal CLI does, each
// workflow whose run checks its own ID under innocent-looking-id, and a compose that names its
// VM's UUID: each fails at once, refused, before any activity (the worker has none that could
// answer). With -record it writes the refused histories for the replay tests.
func TestWorkflowsRefuseAnotherIDOnDevServer(t *testing.T) {
	c := devServer(t)
	w := workers.NewMigrationWorker(c, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	continued := transferInput(0)
	continued.Continuation = &workflows.TransferContinuation{}
	machine := "5e000000-0000-4000-8000-000000000001"
	vm := workflows.PodVMInput{PodTarget: podTarget(), Machine: machine}
	ownUUID := composeInput()
	ownUUID.VM.UUID = machine
	const innocent = "innocent-looking-id"
	for _, s := range []struct {
		history string
		id      string
		wf, in  any
		errType string
	}{
		{filepath.Join(batchHistoryDir, "own_id_refused_batch_history.json"), innocent, workflows.MigrateMachineBatch,
			workflows.MigrateMachineBatchInput{SourceRegion: "east", TargetRegion: "west", Machines: machineUUIDs(2), Grant: "grant"}, activities.ErrNonCanonicalWorkID},
		{filepath.Join(bulkHistoryDir, "own_id_refused_bulk_history.json"), innocent, workflows.BulkMigrate,
			workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Pool: "gold"}, Grant: "grant"}, activities.ErrNonCanonicalWorkID},
		{filepath.Join(transferHistoryDir, "own_id_refused_transfer_continuation_history.json"), innocent, workflows.TransferRack, continued, activities.ErrNonCanonicalWorkID},
		{filepath.Join(podHistoryDir, "own_id_refused_pod_power_history.json"), innocent, workflows.PodPower,
			workflows.PodPowerInput{PodVMInput: vm, Action: api.PowerOn}, activities.ErrNonCanonicalWorkID},
		{filepath.Join(podHistoryDir, "own_id_refused_pod_decompose_history.json"), innocent, workflows.PodDecompose, vm, activities.ErrNonCanonicalWorkID},
		{filepath.Join(podHistoryDir, "own_uuid_refused_pod_compose_history.json"), composeID, workflows.PodCompose, ownUUID, rackacts.ErrTypeInvalidInput},
	} {
		opts := client.StartWorkflowOptions{ID: s.id, TaskQueue: workflows.TaskQueue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}
		run, err := c.ExecuteWorkflow(ctx, opts, s.wf, s.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); errorType(err) != s.errType {
			t.Errorf("%s: %v, want it refused (%s)", filepath.Base(s.history), err, s.errType)
		}
		if *record {
			writeHistory(ctx, t, c, run, s.history)
		}
	}
}
