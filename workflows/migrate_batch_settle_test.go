package workflows_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// batchParent runs one MigrateMachineBatch as the child a transfer or bulk run would. The
// test environment bounds a child's activities by the child's run timeout (10 minutes unless
// set); a server by nothing, as the move's children set no timeout.
func batchParent(ctx workflow.Context, in workflows.MigrateMachineBatchInput) (activities.BatchResult, error) {
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          workflows.MigrateMachineBatchID(workflow.GetInfo(ctx).WorkflowExecution.ID, in.Machines[0]),
		TaskQueue:           workflows.TaskQueue,
		WorkflowRunTimeout:  30 * 24 * time.Hour,
		WaitForCancellation: true,
	})
	var res activities.BatchResult
	err := workflow.ExecuteChildWorkflow(ctx, workflows.MigrateMachineBatch, in).Get(ctx, &res)
	return res, err
}

// A batch settles every machine it touched before it returns, however long a region is down:
// its worker died with one machine finalized, one copied and one quiesced, then the target
// stayed down for longer than every attempt of the batch. The batch does not give up with
// them half-moved: it retries settling until the target answers, then the finalized machine
// is live on the target and the others live on the source, none held by the batch.
func TestMigrateMachineBatchSettlesEveryMachineWhenARegionStaysDown(t *testing.T) {
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	machines := []string{"finalized", "copied", "quiesced", "untouched"}
	for _, id := range machines {
		east.Put(api.Machine{Uuid: id, Name: "name-" + id, Runnable: true, Available: true, Meta: map[string]string{"machine-role": "machine"}})
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(batchParent)
	env.RegisterWorkflow(workflows.MigrateMachineBatch)
	env.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	migration := workflows.MigrateMachineBatchID("default-test-workflow-id", machines[0])
	if err := regiontest.LeaveAfter(east, west, migration, "finalized", "finalize"); err != nil {
		t.Fatal(err)
	}
	if err := regiontest.LeaveAfter(east, west, migration, "copied", "copy"); err != nil {
		t.Fatal(err)
	}
	if err := regiontest.LeaveAfter(east, west, migration, "quiesced", "quiesce"); err != nil {
		t.Fatal(err)
	}
	// West answers none of the batch's ten attempts, nor the first nine settling ones: it is
	// down for about eleven minutes. (The test environment stops an activity without a
	// maximum of attempts after ten; a server retries it until it succeeds.)
	west.Fail("Info", 503, 19)

	env.ExecuteWorkflow(batchParent, workflows.MigrateMachineBatchInput{SourceRegion: "east", TargetRegion: "west", Machines: machines})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the batch did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("batch: %v", err)
	}
	var res activities.BatchResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range res.Failed {
		failed = append(failed, f.Machine)
		if !f.Undone {
			t.Errorf("failure %+v not undone", f)
		}
	}
	if !slices.Equal(res.Moved, []string{"finalized"}) || !slices.Equal(failed, []string{"copied", "quiesced", "untouched"}) {
		t.Errorf("moved %v, failed %v; want the finalized machine moved, the others failed and undone", res.Moved, failed)
	}
	if dst, ok := west.Machine("finalized"); !ok || !dst.Runnable || dst.Meta[api.MetaMigrating] != "" {
		t.Errorf("finalized machine on west: %+v (found %v), want it live there", dst, ok)
	}
	for _, id := range failed {
		src, _ := east.Machine(id)
		if _, ok := west.Machine(id); ok || !src.Runnable || src.Meta[api.MetaMigrating] != "" {
			t.Errorf("%s: on west %v, on east %+v; want live on east only, not held", id, ok, src)
		}
	}
}

// A batch cancelled while its activity waits to retry (the target does not answer) settles
// its machines before it reports the cancel: a settling MigrateBatch runs on, after the
// cancel, until the target answers. On a real server; with -record it writes the batch's
// history, which takes the settling path, for the replay test.
func TestMigrateMachineBatchSettlesAfterACancelOnDevServer(t *testing.T) {
	c := devServer(t)
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	machines := []string{"5e771e00-0000-4000-8000-000000000001", "5e771e00-0000-4000-8000-000000000002"}
	for i, id := range machines {
		east.Put(api.Machine{Uuid: id, Name: fmt.Sprintf("settle-%d", i), Runnable: true, Available: true, Meta: map[string]string{"machine-role": "machine"}})
	}
	w := workers.NewMigrationWorker(c, &activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	w.RegisterWorkflow(batchParent)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	west.Fail("Info", http.StatusServiceUnavailable, -1)
	const parent = "settle-after-cancel"
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: parent, TaskQueue: workflows.TaskQueue}, batchParent,
		workflows.MigrateMachineBatchInput{SourceRegion: "east", TargetRegion: "west", Machines: machines})
	if err != nil {
		t.Fatal(err)
	}
	batch := workflows.MigrateMachineBatchID(parent, machines[0])
	// scheduled counts the batch's MigrateBatch activities: the second is the settling one.
	scheduled := func() (int, error) {
		n := 0
		it := c.GetWorkflowHistory(ctx, batch, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return 0, err
			}
			if e.GetEventType() == enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
				n++
			}
		}
		return n, nil
	}
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		d, err := c.DescribeWorkflowExecution(ctx, batch, "")
		switch {
		case err != nil:
			return err.Error()
		case len(d.PendingActivities) != 1 || d.PendingActivities[0].Attempt < 2:
			return fmt.Sprintf("batch's pending activities %v, want MigrateBatch failing on the target", d.PendingActivities)
		}
		return ""
	})
	if err := c.CancelWorkflow(ctx, parent, ""); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		if n, err := scheduled(); err != nil || n < 2 {
			return fmt.Sprintf("%d MigrateBatch activities scheduled (%v), want the settling one after the cancel", n, err)
		}
		return ""
	})
	west.Fail("Info", 0, 0) // the target is back
	if err := run.Get(ctx, nil); !temporal.IsCanceledError(err) {
		t.Fatalf("batch parent: %v, want cancelled", err)
	}
	var res activities.BatchResult
	if err := c.GetWorkflow(ctx, batch, "").Get(ctx, &res); !temporal.IsCanceledError(err) {
		t.Errorf("batch: %v, want cancelled", err)
	}
	for _, id := range machines {
		src, _ := east.Machine(id)
		if _, ok := west.Machine(id); ok || !src.Runnable || src.Meta[api.MetaMigrating] != "" {
			t.Errorf("%s: on west %v, on east %+v; want live on east only, not held", id, ok, src)
		}
	}
	if *record {
		writeHistory(ctx, t, c, c.GetWorkflow(ctx, batch, ""), filepath.Join(batchHistoryDir, "batch_settle_after_cancel_history.json"))
	}
}
