package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// The two builds of a rolling upgrade, each a worker whose identity is its build ID, so a
// history names the build that ran each task.
const (
	oldBuild = "old-build"
	newBuild = "new-build"
)

// startBuild starts a migration worker of build on the task queue every build polls and
// registers more workflows on it (the code only that build has).
func startBuild(t *testing.T, c client.Client, build string, acts *activities.Activities, register func(worker.Registry)) {
	t.Helper()
	w := workers.NewMigrationWorker(c, acts, workers.WithOptions(worker.Options{Identity: build}), workers.Versioned(build))
	if register != nil {
		register(w)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

func makeCurrent(t *testing.T, c client.Client, build string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := workers.MakeCurrent(ctx, c, build); err != nil {
		t.Fatal(err)
	}
	if current, err := workers.CurrentBuildID(ctx, c); err != nil || current != build {
		t.Fatalf("current build %q (%v) after MakeCurrent(%s)", current, err, build)
	}
}

// ranExecution is a run of a move's tree and when it started.
type ranExecution struct {
	workflow.Execution
	Type    string
	Started time.Time
}

// assertRanOnlyOn checks that every workflow and activity task of the runs and of every child
// they started, recursively, was done by build's worker, and that each run is pinned to build.
// It returns the runs.
func assertRanOnlyOn(ctx context.Context, t *testing.T, c client.Client, build string, runs ...workflow.Execution) []ranExecution {
	t.Helper()
	var seen []ranExecution
	for len(runs) > 0 {
		e := runs[0]
		runs = runs[1:]
		ran := ranExecution{Execution: e}
		it := c.GetWorkflowHistory(ctx, e.ID, e.RunID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				ran.Type, ran.Started = a.GetWorkflowType().GetName(), ev.GetEventTime().AsTime()
			}
			identity := ev.GetWorkflowTaskCompletedEventAttributes().GetIdentity() + ev.GetActivityTaskStartedEventAttributes().GetIdentity()
			if identity != "" && identity != build {
				t.Errorf("%s %s: event %d (%s) done by %s, want %s", e.ID, e.RunID, ev.GetEventId(), ev.GetEventType(), identity, build)
			}
			if child := ev.GetChildWorkflowExecutionStartedEventAttributes(); child != nil {
				runs = append(runs, workflow.Execution{ID: child.GetWorkflowExecution().GetWorkflowId(), RunID: child.GetWorkflowExecution().GetRunId()})
			}
		}
		desc, err := c.DescribeWorkflowExecution(ctx, e.ID, e.RunID)
		if err != nil {
			t.Fatal(err)
		}
		v := desc.GetWorkflowExecutionInfo().GetVersioningInfo()
		if v.GetBehavior() != enums.VERSIONING_BEHAVIOR_PINNED || v.GetDeploymentVersion().GetBuildId() != build {
			t.Errorf("%s %s: versioning %s on %q, want pinned to %s", e.ID, e.RunID, v.GetBehavior(), v.GetDeploymentVersion().GetBuildId(), build)
		}
		seen = append(seen, ran)
	}
	return seen
}

// A rolling upgrade with a bulk run in flight: the run started while the old build was
// current keeps all its tasks on old-build workers after the new build is made current, its
// continuation and the children it starts after the switch included, while a migration
// started after the switch and a schedule's run go to the new build.
func TestRunsStayOnTheBuildThatStartedThemOnDevServer(t *testing.T) {
	c := devServer(t)
	names := []string{"pin-a", "pin-b", "pin-c", "pin-d"}
	uuids := []string{"5a7a9fb0-0000-4000-8000-00000000000a", "5a7a9fb0-0000-4000-8000-00000000000b", "5a7a9fb0-0000-4000-8000-00000000000c", "5a7a9fb0-0000-4000-8000-00000000000d"}
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	for i, name := range names {
		m := birdy()
		m.Uuid, m.Name, m.CurrentJob = uuids[i], name, ""
		m.HardwareAddrs = []string{fmt.Sprintf("52:54:00:00:01:%02x", i)}
		if i == 0 {
			m.Meta[api.MetaAgentLastSeen] = "2026-11-30T06:00:00Z" // its migration waits for the agent
		}
		east.Put(m)
	}
	acts := &activities.Activities{Regions: regiontest.Resolver(t, east, west)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	startBuild(t, c, oldBuild, acts, nil)
	makeCurrent(t, c, oldBuild)
	// One machine per run: pin-b's batch is started by the continuation, after the switch.
	in := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Names: names[:2]}, Window: 1, MachinesPerRun: 1}
	bulk, err := c.ExecuteWorkflow(ctx, workflows.BulkMigrateStartOptions("rolling"), workflows.BulkMigrate, in)
	if err != nil {
		t.Fatal(err)
	}
	first := bulk.GetRunID() // Get follows the continuations
	waitForPhase(ctx, t, c, c.GetWorkflow(ctx, workflows.MigrateMachineID(uuids[0]), ""), workflows.PhaseRepointing)

	startBuild(t, c, newBuild, acts, nil)
	makeCurrent(t, c, newBuild)
	switched := time.Now()
	west.Update(uuids[0], func(m *api.Machine) { m.Meta[api.MetaAgentLastSeen] = "2026-11-30T07:00:00Z" })
	var res workflows.BulkMigrateResult
	if err := bulk.Get(ctx, &res); err != nil || res.Migrated != 2 {
		t.Fatalf("bulk run: %+v, %v; want 2 migrated", res, err)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, bulk.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	last := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if last == first {
		t.Fatal("the bulk run did not continue as new: the test proves nothing about continuations")
	}
	ran := assertRanOnlyOn(ctx, t, c, oldBuild, workflow.Execution{ID: bulk.GetID(), RunID: first}, workflow.Execution{ID: bulk.GetID(), RunID: last})
	startedAfter := 0
	for _, r := range ran {
		if r.Type == "MigrateMachineBatch" && r.Started.After(switched) {
			startedAfter++
		}
	}
	if startedAfter == 0 {
		t.Errorf("no batch of the bulk run started after the switch: %+v", ran)
	}

	move, err := c.ExecuteWorkflow(ctx, workflows.MigrateMachineStartOptions(uuids[2]), workflows.MigrateMachine,
		workflows.MigrateMachineInput{SourceRegion: "east", TargetRegion: "west", Machine: uuids[2]})
	if err != nil {
		t.Fatal(err)
	}
	if err := move.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	assertRanOnlyOn(ctx, t, c, newBuild, workflow.Execution{ID: move.GetID(), RunID: move.GetRunID()})

	night := workflows.BulkMigrateInput{SourceRegion: "east", TargetRegion: "west", Selector: activities.Selector{Names: names[3:]}}
	if err := moves.CreateSchedule(ctx, c, "night", "0 2 * * *", night); err != nil {
		t.Fatal(err)
	}
	if err := moves.TriggerSchedule(ctx, c, "night"); err != nil {
		t.Fatal(err)
	}
	scheduled := scheduledRun(ctx, t, c, workflows.BulkMigrateID("night"))
	if err := c.GetWorkflow(ctx, scheduled.ID, scheduled.RunID).Get(ctx, &res); err != nil || res.Migrated != 1 {
		t.Fatalf("scheduled bulk run: %+v, %v; want 1 migrated", res, err)
	}
	assertRanOnlyOn(ctx, t, c, newBuild, scheduled)
}

// scheduledRun waits for the schedule's first run and returns it.
func scheduledRun(ctx context.Context, t *testing.T, c client.Client, scheduleID string) workflow.Execution {
	t.Helper()
	h := c.ScheduleClient().GetHandle(ctx, scheduleID)
	for {
		d, err := h.Describe(ctx)
		if err == nil && len(d.Info.RecentActions) > 0 {
			started := d.Info.RecentActions[0].StartWorkflowResult
			return workflow.Execution{ID: started.WorkflowID, RunID: started.FirstExecutionRunID}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("schedule %s started nothing: %v", scheduleID, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// newBuildField is a field of MigrateMachine's input that only the new build knows: the old
// build's strict decoding refuses it.
const newBuildField = "FieldOnlyTheNewBuildKnows"

// newBuildChildren is the new build's parent: it starts MigrateMachine children whose input
// carries newBuildField, and fails when one fails.
func newBuildChildren(ctx workflow.Context, n int) error {
	var futures []workflow.ChildWorkflowFuture
	for i := range n {
		opts := workflow.ChildWorkflowOptions{WorkflowID: fmt.Sprintf("%s/child-%d", workflow.GetInfo(ctx).WorkflowExecution.ID, i)}
		in := map[string]any{"SourceRegion": "east", "TargetRegion": "west", "Machine": birdyUUID, newBuildField: true}
		futures = append(futures, workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), "MigrateMachine", in))
	}
	for _, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// newBuildMigrateMachine is the new build's MigrateMachine as far as this test needs: it
// decodes the input with newBuildField.
func newBuildMigrateMachine(_ workflow.Context, in map[string]json.RawMessage) error {
	if _, ok := in[newBuildField]; !ok {
		return fmt.Errorf("input without %s: %v", newBuildField, in)
	}
	return nil
}

// After the switch, a parent of the new build starts children whose input the old build
// cannot decode: each runs on the new build, none is handed to the old build's workers, which
// still poll the same task queue (and refuse that input, as a run pinned to them shows).
func TestChildTheOldBuildCannotDecodeStaysOnTheNewBuildOnDevServer(t *testing.T) {
	c := devServer(t)
	acts := &activities.Activities{Regions: regiontest.Resolver(t, regiontest.New("east", "https://east.example:5240", nil), regiontest.New("west", "https://west.example:5240", nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	startBuild(t, c, oldBuild, acts, nil)
	makeCurrent(t, c, oldBuild)
	startBuild(t, c, newBuild, acts, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(newBuildChildren, workflow.RegisterOptions{Name: "NewBuildChildren"})
		r.RegisterWorkflowWithOptions(newBuildMigrateMachine, workflow.RegisterOptions{Name: "MigrateMachine", DisableAlreadyRegisteredCheck: true})
	})
	makeCurrent(t, c, newBuild)

	in := map[string]any{"SourceRegion": "east", "TargetRegion": "west", "Machine": birdyUUID, newBuildField: true}
	onOld, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pinned-to-old", TaskQueue: workflows.TaskQueue,
		VersioningOverride: &client.PinnedVersioningOverride{Version: worker.WorkerDeploymentVersion{DeploymentName: workers.DeploymentName, BuildID: oldBuild}}},
		"MigrateMachine", in)
	if err != nil {
		t.Fatal(err)
	}
	if err := onOld.Get(ctx, nil); err == nil || !strings.Contains(err.Error(), newBuildField) {
		t.Fatalf("the old build ran an input with %s: got %v, want its decoding refused: the test proves nothing", newBuildField, err)
	}

	parent, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "new-build-children", TaskQueue: workflows.TaskQueue}, "NewBuildChildren", 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Get(ctx, nil); err != nil {
		t.Errorf("a child failed: %v", err)
	}
	ran := assertRanOnlyOn(ctx, t, c, newBuild, workflow.Execution{ID: parent.GetID(), RunID: parent.GetRunID()})
	if len(ran) != 9 {
		t.Errorf("%d runs, want the parent and its 8 children: %+v", len(ran), ran)
	}
}
