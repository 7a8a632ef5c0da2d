package activities_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/region/api"
)

const batchMigration = "transfer-rack/r/batch/m1"

// batchMachine is a plain machine of the batch tests: it moves without an agent to wait for.
func batchMachine(id, name string) api.Machine {
	return api.Machine{Uuid: id, Name: name, Runnable: true, Available: true, Meta: map[string]string{"machine-role": "machine"}}
}

// One batch, every outcome: plain machines move with their jobs; a machine with an agent is
// left to the per-machine path untouched; a machine in WorkOrderMode fails untouched; a
// machine the target refuses is undone on its own (live on the source again, no copy left);
// a machine already moved to the target counts as moved. Run again, as after a worker crash,
// the batch changes nothing more.
func TestMigrateBatchMovesEachMachineOrUndoesIt(t *testing.T) {
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	east.Put(batchMachine("m1", "one"))
	east.Put(batchMachine("m2", "two"))
	east.PutJobs(api.Job{Uuid: "job-2", Machine: "m2", State: api.JobFinished})
	agent := batchMachine("m3", "three")
	agent.Meta[api.MetaAgentLastSeen] = "2026-12-01T10:00:00Z"
	east.Put(agent)
	wom := batchMachine("m4", "four")
	wom.WorkOrderMode = true
	east.Put(wom)
	east.Put(batchMachine("m5", "five"))
	west.Put(batchMachine("other", "five")) // the target refuses m5's name
	moved := batchMachine("m6", "six")
	moved.Locked, moved.Runnable = true, false
	moved.Meta = map[string]string{api.MetaRedirectEndpoint: "https://west.example:5240"}
	east.Put(moved)
	west.Put(batchMachine("m6", "six"))

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	in := activities.BatchInput{SourceRegion: "east", TargetRegion: "west", Migration: batchMigration, Machines: []string{"m1", "m2", "m3", "m4", "m5", "m6"}, Grant: "g"}
	for attempt := range 2 {
		v, err := env.ExecuteActivity(a.MigrateBatch, in)
		if err != nil {
			t.Fatal(err)
		}
		var res activities.BatchResult
		if err := v.Get(&res); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Moved, []string{"m1", "m2", "m6"}) || !slices.Equal(res.PerMachine, []string{"m3"}) {
			t.Errorf("attempt %d: moved %v, per-machine %v; want m1 m2 m6, m3", attempt, res.Moved, res.PerMachine)
		}
		var failed []string
		for _, f := range res.Failed {
			failed = append(failed, f.Machine)
			if !f.Undone {
				t.Errorf("attempt %d: failure %+v not undone", attempt, f)
			}
		}
		if !slices.Equal(failed, []string{"m4", "m5"}) {
			t.Fatalf("attempt %d: failed %+v, want m4 and m5", attempt, res.Failed)
		}
		if res.Failed[0].Type != activities.ErrTypeWorkOrderMode || res.Failed[1].Type != activities.ErrTypeRegionRefused {
			t.Errorf("failure types %q, %q", res.Failed[0].Type, res.Failed[1].Type)
		}
	}
	for _, id := range []string{"m1", "m2", "m6"} {
		dst, ok := west.Machine(id)
		src, _ := east.Machine(id)
		if !ok || !dst.Runnable || !src.Locked || src.Meta[api.MetaRedirectEndpoint] != "https://west.example:5240" {
			t.Errorf("%s: target %+v (found %v), source %+v; want live on west, a stub on east", id, dst, ok, src)
		}
	}
	if jobs := west.Jobs("m2"); len(jobs) != 1 || jobs[0].Uuid != "job-2" {
		t.Errorf("jobs of m2 on west: %+v", jobs)
	}
	for _, id := range []string{"m3", "m4", "m5"} {
		src, _ := east.Machine(id)
		if _, ok := west.Machine(id); ok || !src.Runnable || src.Meta[api.MetaMigrating] != "" || src.Locked {
			t.Errorf("%s: on west %v, on east %+v; want untouched, live on east only", id, ok, src)
		}
	}
	for _, call := range journal.Calls() {
		if slices.Contains([]string{"east Quiesce m3", "east Quiesce m4"}, call) {
			t.Errorf("the batch called %q on a machine it must not touch", call)
		}
	}
}

// A batch refuses an input it cannot run, and changes nothing.
func TestMigrateBatchRefusesBadInput(t *testing.T) {
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	for name, in := range map[string]activities.BatchInput{
		"no machines":  {SourceRegion: "east", TargetRegion: "west", Migration: batchMigration},
		"no migration": {SourceRegion: "east", TargetRegion: "west", Machines: []string{"m1"}},
		"too many":     {SourceRegion: "east", TargetRegion: "west", Migration: batchMigration, Machines: make([]string, activities.MaxBatchMachines+1)},
		"same region":  {SourceRegion: "east", TargetRegion: "east", Migration: batchMigration, Machines: []string{"m1"}},
	} {
		if _, err := env.ExecuteActivity(a.MigrateBatch, in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if calls := journal.Calls(); len(calls) != 0 {
		t.Errorf("calls %v for refused inputs", calls)
	}
}

// A worker that stops leaves each machine of a batch where it is and fails the attempt, so a
// retry on another worker resumes them; nothing is undone. The retry moves them all.
func TestMigrateBatchLeavesMachinesToTheRetryWhenTheWorkerStops(t *testing.T) {
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	east.Put(batchMachine("m1", "one"))
	east.Put(batchMachine("m2", "two"))
	in := activities.BatchInput{SourceRegion: "east", TargetRegion: "west", Migration: batchMigration, Machines: []string{"m1", "m2"}}
	var suite testsuite.WorkflowTestSuite
	stopping := suite.NewTestActivityEnvironment()
	stopping.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	stop := make(chan struct{})
	close(stop)
	stopping.SetWorkerStopChannel(stop)
	if _, err := stopping.ExecuteActivity(a.MigrateBatch, in); err == nil || !strings.Contains(err.Error(), "a retry resumes them") {
		t.Fatalf("attempt on a stopping worker: %v, want a retryable error", err)
	}
	for _, id := range in.Machines {
		if m, _ := east.Machine(id); !m.Runnable || m.Meta[api.MetaMigrating] != "" {
			t.Errorf("%s changed by an attempt on a stopping worker: %+v", id, m)
		}
	}
	// East holds m1 for the batch already, as if the stopped attempt had quiesced it.
	if _, err := east.Quiesce(context.Background(), "m1", api.QuiesceRequest{Migration: batchMigration}); err != nil {
		t.Fatal(err)
	}
	retry := suite.NewTestActivityEnvironment()
	retry.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	v, err := retry.ExecuteActivity(a.MigrateBatch, in)
	if err != nil {
		t.Fatal(err)
	}
	var res activities.BatchResult
	if err := v.Get(&res); err != nil || !slices.Equal(res.Moved, in.Machines) {
		t.Errorf("retry: %+v (%v), want both moved", res, err)
	}
}

// A machine another migration has finalized to the same target, whose copy waits inactive
// for that migration's agent, is not the batch's to activate: a retried batch takes such a
// stub and copy for its own (finishMoved) and activates the copy, which the region refuses
// for another migration than the one holding it; that migration's undo then still runs.
func TestMigrateBatchLeavesAnotherMigrationsCopyInactive(t *testing.T) {
	ctx := context.Background()
	const held = "migrate-machine/m1"
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	east.Put(batchMachine("m1", "one"))
	if _, err := east.Quiesce(ctx, "m1", api.QuiesceRequest{Migration: held}); err != nil {
		t.Fatal(err)
	}
	ticket, err := west.MintTicket(ctx, api.TicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := east.Export(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := west.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: b, Migration: held}); err != nil {
		t.Fatal(err)
	}
	if _, err := east.FinalizeMigrationFor(ctx, "m1", held, api.FinalizeRequest{RedirectEndpoint: "https://west.example:5240"}); err != nil {
		t.Fatal(err)
	}

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, east, west)})
	if _, err := env.ExecuteActivity(a.Activate, activities.MachineRef{Region: "west", Machine: "m1", Migration: batchMigration}); err == nil {
		t.Error("the batch's activation of the copy another migration holds succeeded")
	}
	if m, _ := west.Machine("m1"); m.Runnable {
		t.Fatalf("the batch activated the copy migration %s holds: %+v", held, m)
	}
	// That migration's undo still runs.
	if _, err := east.RestoreMigrationFor(ctx, "m1", held); err != nil {
		t.Errorf("restore for %s: %v", held, err)
	}
	if _, err := west.RedirectCopy(ctx, "m1", api.RedirectCopyRequest{RedirectEndpoint: "https://east.example:5240", Migration: held}); err != nil {
		t.Errorf("redirect copy for %s: %v", held, err)
	}
}

// leaveAfter leaves machine id as an attempt of the batch that died after step left it.
func leaveAfter(t *testing.T, east, west *regiontest.Region, id, step string) {
	t.Helper()
	if err := regiontest.LeaveAfter(east, west, batchMigration, id, step); err != nil {
		t.Fatal(err)
	}
}

// Settling a batch finishes what passed the commit point and undoes what the batch holds,
// however long a region stays down: attempts that cannot reach the target fail and change
// nothing, and the attempt after the target is back leaves every machine live on exactly one
// region, none held. Untouched machines are reported not moved.
func TestMigrateBatchSettleFinishesOrUndoesEveryMachine(t *testing.T) {
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	for _, id := range []string{"untouched", "quiesced", "copied", "finalized"} {
		east.Put(batchMachine(id, "name-"+id))
	}
	leaveAfter(t, east, west, "quiesced", "quiesce")
	leaveAfter(t, east, west, "copied", "copy")
	leaveAfter(t, east, west, "finalized", "finalize")
	in := activities.BatchInput{SourceRegion: "east", TargetRegion: "west", Migration: batchMigration,
		Machines: []string{"untouched", "quiesced", "copied", "finalized"}, Settle: true, Reason: "the batch's attempts ran out: west unreachable"}

	var suite testsuite.WorkflowTestSuite
	west.Fail("Info", 503, -1)
	for attempt := range 3 {
		down := suite.NewTestActivityEnvironment()
		down.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, east, west)})
		if _, err := down.ExecuteActivity(a.MigrateBatch, in); err == nil || isNonRetryable(err) {
			t.Fatalf("settle attempt %d with west down: %v, want a retryable error", attempt, err)
		}
	}
	if m, _ := west.Machine("finalized"); m.Runnable {
		t.Fatalf("a settle attempt with west down changed west: %+v", m)
	}
	west.Fail("Info", 0, 0)
	// West answers again but refuses its first two activations: the attempt that meets them
	// leaves the finalized machine for the next one.
	west.Fail("Activate", 503, 5)
	var res activities.BatchResult
	for attempt := 0; ; attempt++ {
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(&activities.Activities{Regions: regiontest.Resolver(t, east, west)})
		v, err := env.ExecuteActivity(a.MigrateBatch, in)
		if err == nil {
			if err := v.Get(&res); err != nil {
				t.Fatal(err)
			}
			break
		}
		if isNonRetryable(err) || attempt > 3 {
			t.Fatalf("settle attempt %d: %v", attempt, err)
		}
	}
	if !slices.Equal(res.Moved, []string{"finalized"}) || len(res.PerMachine) != 0 {
		t.Errorf("moved %v, per-machine %v; want the finalized machine moved", res.Moved, res.PerMachine)
	}
	var failed []string
	for _, f := range res.Failed {
		failed = append(failed, f.Machine)
		if !f.Undone || !strings.Contains(f.Error, "west unreachable") {
			t.Errorf("failure %+v: want undone, saying why the batch settled", f)
		}
	}
	if !slices.Equal(failed, []string{"untouched", "quiesced", "copied"}) {
		t.Errorf("failed %v, want the three machines not finalized", failed)
	}
	if m, ok := west.Machine("finalized"); !ok || !m.Runnable {
		t.Errorf("finalized machine on west: %+v (found %v), want it live there", m, ok)
	}
	for _, id := range failed {
		src, _ := east.Machine(id)
		if _, ok := west.Machine(id); ok || !src.Runnable || src.Meta[api.MetaMigrating] != "" {
			t.Errorf("%s: on west %v, on east %+v; want live on east only, not held", id, ok, src)
		}
	}
}

// An attempt whose own time ran out (the server gives its machines to the next attempt)
// leaves each machine at its next step boundary, as a stopping worker does: undoing them
// would undo the next attempt's work. A cancel the workflow asked for undoes them.
func TestMigrateBatchAttemptThatTimesOutUndoesNothing(t *testing.T) {
	// The causes the SDK gives the activity's context: a StartToClose or heartbeat timeout,
	// and a cancel the workflow asked for.
	for _, tc := range []struct {
		name     string
		cause    error
		wantHeld bool
	}{
		{"timed out", context.DeadlineExceeded, true},
		{"cancelled", temporal.NewCanceledError(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			journal := &regiontest.Journal{}
			east := regiontest.New("east", "https://east.example:5240", journal)
			west := regiontest.New("west", "https://west.example:5240", journal)
			east.Put(batchMachine("m1", "one"))
			acts := &activities.Activities{Regions: regiontest.Resolver(t, east, west)}
			in := activities.BatchInput{SourceRegion: "east", TargetRegion: "west", Migration: batchMigration, Machines: []string{"m1"}}
			held, release := east.Hold("Quiesce")
			ctx, end := context.WithCancelCause(context.Background())
			type result struct {
				res activities.BatchResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := acts.MigrateBatch(ctx, in)
				done <- result{res, err}
			}()
			<-held
			end(tc.cause) // the attempt ends while its quiesce is in flight
			release()
			got := <-done
			m, _ := east.Machine("m1")
			if held := m.Meta[api.MetaMigrating] == batchMigration; held != tc.wantHeld {
				t.Fatalf("after the attempt (%+v, %v): m1 held by the batch %v, want %v; calls %v", got.res, got.err, held, tc.wantHeld, journal.Calls())
			}
			if !tc.wantHeld {
				if got.err != nil || len(got.res.Failed) != 1 || !got.res.Failed[0].Undone {
					t.Errorf("cancelled attempt: %+v, %v; want m1 failed and undone", got.res, got.err)
				}
				return
			}
			if got.err == nil || isNonRetryable(got.err) {
				t.Fatalf("timed-out attempt: %+v, %v; want a retryable error", got.res, got.err)
			}
			res, err := acts.MigrateBatch(context.Background(), in)
			if err != nil || !slices.Equal(res.Moved, []string{"m1"}) {
				t.Errorf("the next attempt: %+v, %v; want m1 moved", res, err)
			}
		})
	}
}

// isNonRetryable reports an error a retry cannot fix.
func isNonRetryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}
