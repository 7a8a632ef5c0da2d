package workflows_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/workflows"
)

// batchHistoryDir holds the recorded MigrateMachineBatch histories.
var batchHistoryDir = filepath.Join("testdata", "batch")

// TestTransferRackBatchedOnDevServer runs a transfer on the batched path on a real Temporal
// server: 60 machines in two MigrateMachineBatch children (fake MigrateBatch activity), one
// of them left to a per-machine child. Every batch is found by each of its machines through
// the MachineUuids search attribute. With -record it writes the transfer's and the first
// batch's histories for the replay tests.
func TestTransferRackBatchedOnDevServer(t *testing.T) {
	c := devServer(t)
	machines := machineUUIDs(60)
	acts := newTransferActs(t, machines)
	acts.batchMoves = true
	acts.batchLeave[machines[55]] = true
	children := &fakeChildren{duration: func(string) time.Duration { return 10 * time.Millisecond }}
	main := worker.New(c, workflows.TaskQueue, worker.Options{})
	rack := worker.New(c, rackacts.TaskQueue(transferRack), worker.Options{})
	registerTransfer(main, rack, acts, children)
	for _, w := range []worker.Worker{main, rack} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := client.StartWorkflowOptions{ID: workflows.TransferRackID(transferRack), TaskQueue: workflows.TaskQueue}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.TransferRack, transferInput(2))
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.TransferRackResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Machines != len(machines) || len(acts.batches) != 2 || !slices.Equal(children.started, []string{workflows.MigrateMachineID(machines[55])}) {
		t.Errorf("result %+v after %d batches and per-machine children %v", res, len(acts.batches), children.started)
	}
	firstBatch := workflows.TransferRackID(transferRack) + "/batch/" + machines[0]
	for _, m := range []string{machines[0], machines[49], machines[50], machines[59]} {
		want := firstBatch
		if m >= machines[50] {
			want = workflows.TransferRackID(transferRack) + "/batch/" + machines[50]
		}
		query := workflows.MachineUuidsKey.GetName() + " = '" + m + "'"
		testutil.EventuallyOK(t, 20*time.Second, func() string {
			resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
			switch {
			case err != nil:
				return err.Error()
			case len(resp.Executions) != 1 || resp.Executions[0].Execution.WorkflowId != want:
				return fmt.Sprintf("%s finds %v, want %s", query, resp.Executions, want)
			}
			return ""
		})
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "transfer_rack_batched_history.json"))
		if err := os.MkdirAll(batchHistoryDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, firstBatch, ""), filepath.Join(batchHistoryDir, "migrate_machine_batch_history.json"))
	}
}

// TestReplayMigrateMachineBatchHistories replays the recorded batch histories against the
// current code.
func TestReplayMigrateMachineBatchHistories(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(batchHistoryDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("want the recorded histories in %s (go test ./workflows -run TransferRackBatchedOnDevServer -record)", batchHistoryDir)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.MigrateMachineBatch)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, path); err != nil {
				t.Fatal(err)
			}
		})
	}
}
