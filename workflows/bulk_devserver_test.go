package workflows_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// bulkHistoryDir holds the recorded BulkMigrate histories; a directory of its own, as the
// replayer of testdata/*.json runs MigrateMachine only.
var bulkHistoryDir = filepath.Join("testdata", "bulk")

// TestBulkMigrateOnDevServer runs BulkMigrate with the real worker wiring and activities over
// fake regions: of three machines named, two migrate and the third, already being migrated
// by a migration started before, is reported skipped. With -record it writes the history for
// TestReplayBulkMigrateHistories.
func TestBulkMigrateOnDevServer(t *testing.T) {
	c := devServer(t)
	names := []string{"bulk-a", "bulk-b", "bulk-c"}
	uuids := []string{"2d4d6c8e-0000-4000-8000-00000000000a", "2d4d6c8e-0000-4000-8000-00000000000b", "2d4d6c8e-0000-4000-8000-00000000000c"}
	east, west := startBulkWorker(t, c, names, uuids, func(m *api.Machine) {
		if m.Uuid == uuids[2] {
			m.Meta[api.MetaAgentLastSeen] = "2026-11-30T06:00:00Z" // an agent that never comes back: its migration waits
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	busy, err := c.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(uuids[2]), workflows.MigrateMachine,
		workflows.MigrateMachineInput{SourceRegion: "east", TargetRegion: "west", Machine: uuids[2]})
	if err != nil {
		t.Fatal(err)
	}
	waitForPhase(ctx, t, c, busy, workflows.PhaseRepointing)

	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Names: names}, Window: 2}
	run, err := c.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions("nightly"), workflows.BulkMigrate, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BulkMigrateResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	want := []workflows.MachineSkip{{Machine: uuids[2], Reason: "skipped (already migrating, workflow ID " + workflows.MigrateMachineID(uuids[2]) + ")"}}
	if res.Total != 3 || res.Migrated != 2 || len(res.Failed) != 0 || !slices.Equal(res.Skipped, want) {
		t.Errorf("result %+v, want %v migrated and %+v skipped", res, uuids[:2], want)
	}
	for _, u := range uuids[:2] {
		if m, ok := west.Machine(u); !ok || !m.Runnable {
			t.Errorf("machine %s not active on west: %+v", u, m)
		}
	}
	// Each check names the move it is for, as the Temporal server reports the root and its
	// first run: the bulk run for its children (so they may finish under a grant that
	// expired), none for a root, which names its own run.
	wantChecks := map[string]api.GrantCheck{
		uuids[0]: {Move: run.GetID(), MoveRun: run.GetRunID()},
		uuids[1]: {Move: run.GetID(), MoveRun: run.GetRunID()},
		uuids[2]: {MoveRun: busy.GetRunID()},
		"":       {MoveRun: run.GetRunID()}, // the bulk run's own check
	}
	for _, check := range east.GrantChecks() {
		if w, ok := wantChecks[check.Key]; !ok || check.Move != w.Move || check.MoveRun != w.MoveRun {
			t.Errorf("grant check %+v: want Move %q, MoveRun %q", check, w.Move, w.MoveRun)
		}
		delete(wantChecks, check.Key)
	}
	if len(wantChecks) != 0 {
		t.Errorf("no grant check for %v", wantChecks)
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join(bulkHistoryDir, "bulk_migrate_history.json"))
	}
	if err := c.CancelWorkflow(ctx, busy.GetID(), busy.GetRunID()); err != nil {
		t.Fatal(err)
	}
	if err := busy.Get(ctx, nil); !temporal.IsCanceledError(err) {
		t.Errorf("the migration already running: got %v, want it cancelled", err)
	}
}

// With two machines per run, three machines take two runs; with -record both histories are
// written, so the replay covers continue-as-new and the run that continues.
func TestBulkMigrateOnDevServerContinuesAsNew(t *testing.T) {
	c := devServer(t)
	names := []string{"cont-a", "cont-b", "cont-c"}
	uuids := []string{"3e5e7d9f-0000-4000-8000-00000000000a", "3e5e7d9f-0000-4000-8000-00000000000b", "3e5e7d9f-0000-4000-8000-00000000000c"}
	_, west := startBulkWorker(t, c, names, uuids, func(*api.Machine) {})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Names: names}, Window: 1, MachinesPerRun: 2}
	run, err := c.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions("continued"), workflows.BulkMigrate, in)
	if err != nil {
		t.Fatal(err)
	}
	firstRunID := run.GetRunID()
	var res workflows.BulkMigrateResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Total != 3 || res.Migrated != 3 || len(res.Failed) != 0 {
		t.Errorf("result %+v, want %v migrated in order", res, uuids)
	}
	for _, u := range uuids {
		if _, ok := west.Machine(u); !ok {
			t.Errorf("machine %s not on west", u)
		}
	}
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	lastRunID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if lastRunID == firstRunID {
		t.Fatal("the bulk migration did not continue as new")
	}
	if *record {
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, run.GetID(), firstRunID), filepath.Join(bulkHistoryDir, "bulk_migrate_continued_as_new_history.json"))
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, run.GetID(), lastRunID), filepath.Join(bulkHistoryDir, "bulk_migrate_continuation_history.json"))
	}
}

// startBulkWorker puts the named machines on a fake east region (change adjusts each), and
// runs the real worker over east and an empty west until the test ends. It returns west.
func startBulkWorker(t *testing.T, c client.Client, names, uuids []string, change func(*api.Machine)) (east, west *regiontest.Region) {
	journal := &regiontest.Journal{}
	east = regiontest.New("east", "https://east.example:5240", journal)
	west = regiontest.New("west", "https://west.example:5240", journal)
	for i, name := range names {
		m := birdy()
		m.Uuid, m.Name, m.CurrentJob = uuids[i], name, ""
		m.HardwareAddrs = []string{fmt.Sprintf("52:54:00:00:00:%02x", i)}
		change(&m)
		east.Put(m)
	}
	w := workers.NewMigrationWorker(c, &activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return east, west
}

// On the bounded path (bulkBoundedChange) three named machines, two per run, take two runs
// that each select their own page of names; the second starts from the first's cursor, with
// counts and no list of machines. The first machine's import is refused: the result names it,
// and so does moves.BulkFailures from the batch that tried it. With -record both histories
// are written, so the replay covers the paged selection, its continue-as-new and the run that
// continues.
func TestBulkMigrateOnDevServerPagesAcrossRuns(t *testing.T) {
	c := devServer(t)
	names := []string{"paged-c", "paged-a", "paged-b"}
	uuids := []string{"4f6f8eaf-0000-4000-8000-00000000000c", "4f6f8eaf-0000-4000-8000-00000000000a", "4f6f8eaf-0000-4000-8000-00000000000b"}
	_, west := startBulkWorker(t, c, names, uuids, func(*api.Machine) {})
	west.Fail("Import", http.StatusUnprocessableEntity, 1) // paged-a's, the first name's
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Names: names}, Window: 1, MachinesPerRun: 2}
	run, err := c.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions("paged"), workflows.BulkMigrate, in)
	if err != nil {
		t.Fatal(err)
	}
	firstRunID := run.GetRunID()
	var res workflows.BulkMigrateResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Total != 3 || res.Migrated != 2 || res.FailedCount != 1 || len(res.Succeeded) != 0 || len(res.Failed) != 1 || res.Failed[0].Machine != uuids[1] {
		t.Errorf("result %+v, want 2 of 3 counted migrated, %s failed and no machine listed", res, uuids[1])
	}
	failures, err := moves.BulkFailures(ctx, c, run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	if len(failures) != 1 || failures[0].Machine != uuids[1] || !strings.Contains(failures[0].Error, "422") {
		t.Errorf("BulkFailures: %+v, want %s refused by the import", failures, uuids[1])
	}
	for _, u := range []string{uuids[0], uuids[2]} {
		if _, ok := west.Machine(u); !ok {
			t.Errorf("machine %s not on west", u)
		}
	}
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	last := c.GetWorkflow(ctx, run.GetID(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	if last.GetRunID() == firstRunID {
		t.Fatal("the bulk migration did not continue as new")
	}
	it := c.GetWorkflowHistory(ctx, last.GetID(), last.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	start, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	var continued workflows.BulkMigrateInput
	if err := converter.GetDefaultDataConverter().FromPayloads(start.GetWorkflowExecutionStartedEventAttributes().GetInput(), &continued); err != nil {
		t.Fatal(err)
	}
	if k := continued.Continuation; k == nil || k.After != "paged-b" || len(k.Remaining) != 0 || k.Done.Migrated != 1 || k.Done.FailedCount != 1 || k.Done.Total != 3 {
		t.Errorf("continued with %+v, want the cursor after paged-b, 1 of 3 migrated and 1 failed", continued.Continuation)
	}
	if *record {
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, run.GetID(), firstRunID), filepath.Join(bulkBatchedHistoryDir, "bounded_bulk_continued_as_new_history.json"))
		writeHistory(ctx, t, c, last, filepath.Join(bulkBatchedHistoryDir, "bounded_bulk_continuation_history.json"))
	}
}
