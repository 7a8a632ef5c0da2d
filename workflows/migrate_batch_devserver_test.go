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

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
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
	startTransferWorkers(t, c, acts, children)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, res := runTransfer(ctx, t, c, transferInput(2))
	if res.Machines != len(machines) || len(acts.batches) != 2 || !slices.Equal(children.started, []string{workflows.MigrateMachineID(machines[55])}) {
		t.Errorf("result %+v after %d batches and per-machine children %v", res, len(acts.batches), children.started)
	}
	firstBatch := workflows.MigrateMachineBatchID(workflows.TransferRackID(transferRack), machines[0])
	for _, m := range []string{machines[0], machines[49], machines[50], machines[59]} {
		want := firstBatch
		if m >= machines[50] {
			want = workflows.MigrateMachineBatchID(workflows.TransferRackID(transferRack), machines[50])
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
		// Histories recorded before the own-ID check keep their names: they must still replay.
		writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "own_id_transfer_rack_batched_history.json"))
		if err := os.MkdirAll(batchHistoryDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, firstBatch, ""), filepath.Join(batchHistoryDir, "own_id_migrate_machine_batch_history.json"))
	}
}

// TestReplayMigrateMachineBatchHistories replays the recorded batch histories against the
// current code.
func TestReplayMigrateMachineBatchHistories(t *testing.T) {
	replayDir(t, batchHistoryDir, 1, "go test ./workflows -run TransferRackBatchedOnDevServer -record", workflows.MigrateMachineBatch)
}

// bulkBatchedHistoryDir holds BulkMigrate histories on the batched path, run as
// BulkMigrateID(bulkBatchedName): their batches' IDs derive from the run's own ID, which
// replayDir replays them under.
var bulkBatchedHistoryDir = filepath.Join("testdata", "bulk_batched")

const bulkBatchedName = "batched"

// TestBulkMigrateBatchedOnDevServer runs a bulk migration on the batched path with the real
// worker and activities over fake regions: every machine moves in one batch, whose ID names
// the bulk run. With -record it writes the history for TestReplayBulkMigrateBatchedHistories.
func TestBulkMigrateBatchedOnDevServer(t *testing.T) {
	c := devServer(t)
	names := []string{"batch-a", "batch-b", "batch-c"}
	uuids := []string{"5e5e5e5e-0000-4000-8000-00000000000a", "5e5e5e5e-0000-4000-8000-00000000000b", "5e5e5e5e-0000-4000-8000-00000000000c"}
	_, west := startBulkWorker(t, c, names, uuids, func(*api.Machine) {})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Names: names}}
	run, err := c.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions(bulkBatchedName), workflows.BulkMigrate, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BulkMigrateResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Total != 3 || res.Migrated != len(uuids) || len(res.Failed) != 0 {
		t.Errorf("result %+v, want all of %v migrated", res, uuids)
	}
	for _, id := range uuids {
		if m, ok := west.Machine(id); !ok || !m.Runnable {
			t.Errorf("machine %s on west: %+v (found %v), want it live", id, m, ok)
		}
	}
	batch := workflows.MigrateMachineBatchID(workflows.BulkMigrateID(bulkBatchedName), uuids[0])
	if _, err := c.DescribeWorkflowExecution(ctx, batch, ""); err != nil {
		t.Errorf("batch %s: %v", batch, err)
	}
	if *record {
		if err := os.MkdirAll(bulkBatchedHistoryDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeHistory(ctx, t, c, run, filepath.Join(bulkBatchedHistoryDir, "own_id_bulk_migrate_batched_history.json"))
	}
}

// TestReplayBulkMigrateBatchedHistories replays the recorded batched bulk runs as the
// workflow ID they ran under.
func TestReplayBulkMigrateBatchedHistories(t *testing.T) {
	replayDir(t, bulkBatchedHistoryDir, 1, "go test ./workflows -run BulkMigrateBatchedOnDevServer -record", workflows.BulkMigrate)
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
