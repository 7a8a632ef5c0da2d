package workflows_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// TestBulkMigrateControlsOnDevServer pauses a bulk migration and sets its window while its
// first run waits for a machine's agent; the run continues as new paused, starts nothing
// until resumed, then migrates the rest at the new window. With -record it writes both runs'
// histories for TestReplayBulkMigrateBatchedHistories (the batches' IDs derive from the run's,
// so it runs under the name bulkBatchedName).
func TestBulkMigrateControlsOnDevServer(t *testing.T) {
	c := devServer(t)
	names := []string{"ctl-a", "ctl-b", "ctl-c"}
	uuids := []string{"4f6f8eaf-0000-4000-8000-00000000000a", "4f6f8eaf-0000-4000-8000-00000000000b", "4f6f8eaf-0000-4000-8000-00000000000c"}
	_, west := startBulkWorker(t, c, names, uuids, func(m *api.Machine) {
		if m.Uuid == uuids[0] {
			m.Meta[api.MetaAgentLastSeen] = "2026-11-30T06:00:00Z" // its migration waits for its agent
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Names: names}, Window: 1, MachinesPerRun: 2}
	run, err := c.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions(bulkBatchedName), workflows.BulkMigrate, in)
	if err != nil {
		t.Fatal(err)
	}
	firstRunID := run.GetRunID()
	waitForPhase(ctx, t, c, c.GetWorkflow(ctx, workflows.MigrateMachineID(uuids[0]), ""), workflows.PhaseRepointing)
	if s, err := moves.Pause(ctx, c, run.GetID(), "alice"); err != nil || !s.Paused {
		t.Fatalf("pause: %+v, %v", s, err)
	}
	if s, err := moves.SetWindow(ctx, c, run.GetID(), 2, "alice"); err != nil || s != (workflows.ControlState{Paused: true, Window: 2}) {
		t.Fatalf("set-window: %+v, %v", s, err)
	}
	if _, err := moves.Pause(ctx, c, run.GetID(), "bob"); err == nil {
		t.Error("a second pause was accepted")
	}
	west.Update(uuids[0], func(m *api.Machine) { m.Meta[api.MetaAgentLastSeen] = "2026-11-30T07:00:00Z" })

	// The continued run keeps the pause: it starts nothing.
	latest := c.GetWorkflow(ctx, run.GetID(), "")
	p := waitForBulk(ctx, t, c, run.GetID(), firstRunID, func(p workflows.BulkProgress) bool { return p.Paused && p.Done == 2 })
	if p.Window != 2 || p.Running != 0 {
		t.Errorf("continued run's progress %+v", p)
	}
	if _, ok := west.Machine(uuids[2]); ok {
		t.Error("the paused continued run migrated a machine")
	}
	if s, err := moves.Resume(ctx, c, run.GetID(), "bob"); err != nil || s != (workflows.ControlState{Window: 2}) {
		t.Fatalf("resume: %+v, %v", s, err)
	}
	var res workflows.BulkMigrateResult
	if err := latest.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Total != 3 || res.Migrated != len(uuids) {
		t.Errorf("result %+v, want all three migrated", res)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if *record {
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, run.GetID(), firstRunID), filepath.Join(bulkBatchedHistoryDir, "controls_bulk_migrate_paused_history.json"))
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, run.GetID(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()), filepath.Join(bulkBatchedHistoryDir, "controls_bulk_migrate_resumed_history.json"))
	}
}

// waitForBulk polls the progress of the latest run of bulk migration id, other than
// notRunID, until done says yes.
func waitForBulk(ctx context.Context, t *testing.T, c client.Client, id, notRunID string, done func(workflows.BulkProgress) bool) workflows.BulkProgress {
	t.Helper()
	return testutil.EventuallyValue(t, time.Minute, func() (workflows.BulkProgress, string) {
		var p workflows.BulkProgress
		desc, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err == nil && desc.GetWorkflowExecutionInfo().GetExecution().GetRunId() != notRunID {
			if p, err = queryProgress[workflows.BulkProgress](ctx, c, id, ""); err == nil && done(p) {
				return p, ""
			}
		}
		return p, fmt.Sprintf("bulk migration %s: last progress %+v, %v", id, p, err)
	})
}

// TestTransferRackControlsOnDevServer pauses a rack transfer while its first machine
// migrates, sets its window and resumes it: nothing starts while it is paused, and after the
// resume two machines run at once. With -record it writes the history for
// TestReplayTransferRackHistories.
func TestTransferRackControlsOnDevServer(t *testing.T) {
	c := devServer(t)
	machines := machineUUIDs(4)
	acts := newTransferActs(t, machines)
	children := &fakeChildren{duration: func(m string) time.Duration {
		if m == machines[0] {
			return 5 * time.Second // long enough to pause the transfer while it runs
		}
		return time.Second
	}}
	startTransferWorkers(t, c, acts, children)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := workflows.TransferRackID(transferRack)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.TransferRack, transferInput(1))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "a machine's migration to start", func() bool { return children.startedCount() > 0 })
	if s, err := moves.Pause(ctx, c, id, "alice"); err != nil || !s.Paused {
		t.Fatalf("pause: %+v, %v", s, err)
	}
	if s, err := moves.SetWindow(ctx, c, id, 2, "alice"); err != nil || s != (workflows.ControlState{Paused: true, Window: 2}) {
		t.Fatalf("set-window: %+v, %v", s, err)
	}
	p := waitForTransfer(ctx, t, c, id, func(p workflows.TransferProgress) bool { return p.MachinesDone == 1 })
	if !p.Paused || p.Window != 2 || children.startedCount() != 1 {
		t.Errorf("paused transfer: progress %+v, %d children started", p, children.startedCount())
	}
	if s, err := moves.Resume(ctx, c, id, "bob"); err != nil || s.Paused {
		t.Fatalf("resume: %+v, %v", s, err)
	}
	var res workflows.TransferRackResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Machines != len(machines) || children.maxRunning != 2 || children.startedCount() != len(machines) {
		t.Errorf("result %+v, %d children with at most %d at once", res, children.startedCount(), children.maxRunning)
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "transfer_rack_controls_history.json"))
	}
}

// waitForTransfer polls the progress of transfer id until done says yes.
func waitForTransfer(ctx context.Context, t *testing.T, c client.Client, id string, done func(workflows.TransferProgress) bool) workflows.TransferProgress {
	t.Helper()
	return testutil.EventuallyValue(t, time.Minute, func() (workflows.TransferProgress, string) {
		p, err := queryProgress[workflows.TransferProgress](ctx, c, id, "")
		if err == nil && done(p) {
			return p, ""
		}
		return p, fmt.Sprintf("transfer %s: last progress %+v, %v", id, p, err)
	})
}
