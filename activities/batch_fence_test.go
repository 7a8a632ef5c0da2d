package activities_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// An attempt's call that lands after a newer attempt moved the machine changes nothing. The
// first attempt is undoing machine m1 (cancelled after its copy) and its delete of the copy is
// in flight when the next attempt, started later, finds m1 quiesced and copied, finalizes and
// activates it. Landing then, the delete would remove m1's live record, its source being a
// stub: the target refuses it as the older attempt's, and that attempt stops touching m1.
func TestMigrateBatchStaleAttemptsCallChangesNothing(t *testing.T) {
	journal := &regiontest.Journal{}
	east := regiontest.New("east", "https://east.example:5240", journal)
	west := regiontest.New("west", "https://west.example:5240", journal)
	east.Put(batchMachine("m1", "one"))
	acts := &activities.Activities{Regions: regiontest.Resolver(t, east, west)}
	in := activities.BatchInput{SourceRegion: "east", TargetRegion: "west", Migration: batchMigration, Machines: []string{"m1"}}
	exportHeld, releaseExport := east.Hold("Export")
	deleteHeld, releaseDelete := west.Hold("DeleteMachine")
	defer releaseDelete()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		res activities.BatchResult
		err error
	}
	first := make(chan result, 1)
	go func() {
		// Started an hour ago: the test environment starts the next attempt now.
		res, err := acts.MigrateBatch(client.ForAttempt(ctx, api.Attempt{Started: time.Now().Add(-time.Hour), Number: 1}), in)
		first <- result{res, err}
	}()
	wait(t, exportHeld, "the first attempt's export")
	cancel() // the copy lands, then the first attempt undoes it
	releaseExport()
	wait(t, deleteHeld, "the first attempt's delete of the copy")

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	v, err := env.ExecuteActivity(acts.MigrateBatch, in)
	var res activities.BatchResult
	if err == nil {
		err = v.Get(&res)
	}
	if err != nil || !slices.Equal(res.Moved, []string{"m1"}) {
		t.Fatalf("the next attempt: %+v, %v; want m1 moved; calls %v", res, err, journal.Calls())
	}
	_, fenced := west.Fence("m1")
	releaseDelete()
	got := <-first
	if got.err == nil || len(got.res.Moved)+len(got.res.Failed) != 0 {
		t.Errorf("the stale attempt: %+v, %v; want it to fail, reporting nothing of m1", got.res, got.err)
	}
	if m, ok := west.Machine("m1"); !ok || !m.Runnable {
		t.Fatalf("m1 on the target after the stale delete landed: %+v (found %v), want it live; calls %v", m, ok, journal.Calls())
	}
	if m, _ := east.Machine("m1"); m.Meta[api.MetaRedirectEndpoint] != "https://west.example:5240" {
		t.Errorf("m1 on the source: %+v, want the stub redirecting to the target", m)
	}
	if _, now := west.Fence("m1"); now != fenced {
		t.Errorf("the target's fence moved from %s to %s: the stale attempt acted", fenced, now)
	}
}

// wait waits for a held call, failing the test if it never comes.
func wait(t *testing.T, held <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never came", what)
	}
}
