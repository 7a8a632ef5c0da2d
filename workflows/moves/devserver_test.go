package moves_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/tickets"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// devServer starts the Temporal dev server with Ironflow's search attributes and a worker
// of the test workflows below on the workflows' task queue.
func devServer(t *testing.T) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the Temporal dev server")
	}
	if _, err := temporalserver.FindCLI(); err != nil {
		t.Skipf("Temporal CLI not built: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := temporalserver.Start(ctx, temporalserver.Options{UIPort: -1, Headless: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := workers.RegisterSearchAttributes(ctx, c, "default"); err != nil {
		t.Fatal(err)
	}
	w := worker.New(c, workflows.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(stepping, workflow.RegisterOptions{Name: "stepping"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return c
}

// stepping stands in for a migration: it answers the progress query, moves from phase
// "first" to "second" (with an error) on each signal "next", then ends as end says:
// "complete", "fail", or "cancel" (it waits to be cancelled). It refuses every compensation
// request.
func stepping(ctx workflow.Context, end string) (workflows.MigrateMachineResult, error) {
	res := workflows.MigrateMachineResult{MachineName: "birdy"}
	p := workflows.Progress{Phase: "first"}
	if err := workflow.SetQueryHandler(ctx, workflows.ProgressQuery, func() (workflows.Progress, error) { return p, nil }); err != nil {
		return res, err
	}
	if err := workflow.SetUpdateHandler(ctx, workflows.CompensationUpdate, func(workflow.Context, workflows.CompensationRequest) (string, error) {
		return "", errors.New("no undo is stuck")
	}); err != nil {
		return res, err
	}
	next := workflow.GetSignalChannel(ctx, "next")
	next.Receive(ctx, nil)
	p.Phase, p.Errors = "second", []string{"copying: a hiccup (type: Hiccup, retryable: true)"}
	next.Receive(ctx, nil)
	switch end {
	case "fail":
		return res, temporal.NewNonRetryableApplicationError("copying: boom", "Boom", nil)
	case "cancel":
		return res, workflow.Await(ctx, func() bool { return false })
	}
	p.Phase = "done"
	return res, nil
}

// follow starts stepping(end), waits for it with moves.Migration.Wait in the background,
// and steps it through its phases, checking that the progress callback sees each one.
func follow(t *testing.T, c client.Client, ctx context.Context, id, end string) ([]workflows.Progress, workflows.MigrateMachineResult, error) {
	t.Helper()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, "stepping", end)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []workflows.Progress
	type waited struct {
		res workflows.MigrateMachineResult
		err error
	}
	done := make(chan waited, 1)
	go func() {
		res, err := moves.Migration.Wait(ctx, c, run, func(p workflows.Progress) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, p)
		})
		done <- waited{res, err}
	}()
	phaseSeen := func(phase string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.ContainsFunc(seen, func(p workflows.Progress) bool { return p.Phase == phase })
		}
	}
	for _, phase := range []string{"first", "second"} {
		testutil.Eventually(t, 20*time.Second, "progress "+phase, phaseSeen(phase))
		if err := c.SignalWorkflow(ctx, id, "", "next", nil); err != nil {
			t.Fatal(err)
		}
	}
	if end == "cancel" {
		if err := moves.Cancel(ctx, c, id); err != nil {
			t.Fatal(err)
		}
	}
	w := <-done
	mu.Lock()
	defer mu.Unlock()
	return seen, w.res, w.err
}

// TestWaitFollowsProgressAndSaysHowARunEnded runs the one follow loop of every move against
// a real server: progress reaches the callback as it changes, once more after the end, and a
// failed or cancelled run is an error in plain words.
func TestWaitFollowsProgressAndSaysHowARunEnded(t *testing.T) {
	c := devServer(t)
	ctx := context.Background()

	seen, res, err := follow(t, c, ctx, "moves-complete", "complete")
	if err != nil || res.MachineName != "birdy" {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	if last := seen[len(seen)-1]; last.Phase != "done" {
		t.Errorf("last progress %+v: the final phase, set just before the end, was not asked for", last)
	}

	_, _, err = follow(t, c, ctx, "moves-fail", "fail")
	if want := "migration moves-fail failed: copying: boom"; err == nil || err.Error() != want {
		t.Errorf("failed run: %v, want %q", err, want)
	}

	_, _, err = follow(t, c, ctx, "moves-cancel", "cancel")
	if want := "migration moves-cancel was canceled; the steps it had done were undone"; err == nil || err.Error() != want {
		t.Errorf("cancelled run: %v, want %q", err, want)
	}

	// A wait that is interrupted leaves the run going.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "moves-stopped", TaskQueue: workflows.TaskQueue}, "stepping", "complete")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*moves.ProgressInterval)
	defer cancel()
	_, err = moves.Migration.Wait(short, c, run, nil)
	var stopped *moves.StoppedError
	if !errors.As(err, &stopped) || stopped.ID != "moves-stopped" || stopped.Subject != "migration" {
		t.Errorf("interrupted wait: %v, want a *StoppedError naming the run", err)
	}
	if r, err := moves.Describe(ctx, c, "moves-stopped"); err != nil || !r.Running() || r.Type != "stepping" {
		t.Errorf("after an interrupted wait: %+v, %v; want it running", r, err)
	}
	if _, err := moves.Describe(ctx, c, "moves-none"); !moves.IsNotFound(err) {
		t.Errorf("Describe of no run: %v, want not found", err)
	}
	_, err = moves.Compensate(ctx, c, "moves-stopped", workflows.CompensationRequest{Action: workflows.CompensationRetry, Reason: "r", By: "alice"})
	var refused *moves.RefusedError
	if !errors.As(err, &refused) || refused.ID != "moves-stopped" {
		t.Errorf("refused compensation: %v, want a *RefusedError", err)
	}
	if _, err := moves.Compensate(ctx, c, "moves-none", workflows.CompensationRequest{}); err == nil || errors.As(err, &refused) {
		t.Errorf("compensation of no run: %v, want an error that is not a refusal", err)
	}
}

// TestStartRecordsWhoAndWhatAndRefusesASecondRun: a start carries its subject's search
// attributes and who its grant names, and a second start of the same subject is refused
// naming the open run.
func TestStartRecordsWhoAndWhatAndRefusesASecondRun(t *testing.T) {
	c := devServer(t)
	ctx := context.Background()
	key, err := tickets.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := tickets.NewSigner(key, "region-a", "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	grant, err := signer.MintGrant(time.Now(), 0, api.GrantClaims{Kind: api.GrantRack, Subject: "rack-1", GrantedTo: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: "rack-1", Grant: grant.Token}
	// Nothing here runs TransferRack: the run stays open until the test terminates it.
	run, err := moves.StartTransfer(ctx, c, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), run.GetID(), "", "test over") })
	if run.GetID() != workflows.TransferRackID("rack-1") {
		t.Errorf("workflow ID %s", run.GetID())
	}
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	var who string
	if p := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[workflows.MemoStartedBy]; p == nil {
		t.Error("no StartedBy memo")
	} else if err := converter.GetDefaultDataConverter().FromPayload(p, &who); err != nil || who != "alice" {
		t.Errorf("StartedBy %q, %v", who, err)
	}
	r, err := moves.Describe(ctx, c, run.GetID())
	if err != nil || r.SourceRegion != "region-a" || r.TargetRegion != "region-b" || r.Type != moves.Transfer.Type() {
		t.Errorf("Describe = %+v, %v", r, err)
	}
	_, err = moves.StartTransfer(ctx, c, in)
	var running *moves.AlreadyRunningError
	if !errors.As(err, &running) || running.ID != run.GetID() || running.RunID != run.GetRunID() {
		t.Errorf("second start: %v, want an *AlreadyRunningError naming run %s", err, run.GetRunID())
	}
}
