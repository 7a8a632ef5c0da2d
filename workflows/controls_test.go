package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// controlAnswer is what the workflow answered to one control Update.
type controlAnswer struct {
	state    workflows.ControlState
	rejected error
	err      error
}

// control sends the control Update name at delay into the run and returns where its answer
// will be.
func control(env *testsuite.TestWorkflowEnvironment, delay time.Duration, name string, req workflows.ControlRequest) *controlAnswer {
	got := &controlAnswer{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { got.rejected = err },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				got.err = err
				if s, ok := v.(workflows.ControlState); ok {
					got.state = s
				}
			},
		}, req)
	}, delay)
	return got
}

// audits records the AuditMoveControl calls of a test environment.
func audits(env *testsuite.TestWorkflowEnvironment) *[]activities.MoveControlAuditInput {
	var got []activities.MoveControlAuditInput
	env.OnActivity(a.AuditMoveControl, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.MoveControlAuditInput) error {
		got = append(got, in)
		return nil
	})
	return &got
}

func apiControl(action string, window int, by string) api.MoveControl {
	return api.MoveControl{Migration: workflows.BulkMigrateID("test"), Action: action, Window: window, By: by}
}

func tenMinutes(string) time.Duration { return 10 * time.Minute }

func TestBulkMigratePauseStopsStartsUntilResumed(t *testing.T) {
	machines := machineUUIDs(6)
	children := &fakeChildren{duration: tenMinutes}
	b := newBulkEnv(t, machines, children)
	audited := audits(b.env)
	paused := control(b.env, time.Minute, workflows.PauseUpdate, workflows.ControlRequest{By: "alice"})
	var during workflows.BulkProgress
	var startedWhilePaused int
	b.env.RegisterDelayedCallback(func() {
		during = b.progress()
		startedWhilePaused = len(children.started)
	}, 30*time.Minute)
	resumed := control(b.env, 31*time.Minute, workflows.ResumeUpdate, workflows.ControlRequest{By: "bob"})
	res, err := b.run(bulkInput(2))
	if err != nil {
		t.Fatal(err)
	}
	if paused.rejected != nil || paused.err != nil || !paused.state.Paused {
		t.Fatalf("pause: %+v", paused)
	}
	if resumed.rejected != nil || resumed.err != nil || resumed.state.Paused {
		t.Fatalf("resume: %+v", resumed)
	}
	// The two children running when it paused finished; none started for 20 minutes.
	if startedWhilePaused != 2 || during.Done != 2 || during.Running != 0 || !during.Paused {
		t.Errorf("while paused: %d started, progress %+v", startedWhilePaused, during)
	}
	if res.Migrated != len(machines) || len(children.started) != len(machines) {
		t.Errorf("after the resume: result %+v, %d started", res, len(children.started))
	}
	if p := b.progress(); p.Paused {
		t.Errorf("final progress %+v", p)
	}
	want := []activities.MoveControlAuditInput{
		{Region: "east", Control: apiControl("pause", 0, "alice")},
		{Region: "east", Control: apiControl("resume", 0, "bob")},
	}
	equal(t, "audits", *audited, want)
}

func TestBulkMigrateSetWindowTakesEffectAtTheNextStart(t *testing.T) {
	machines := machineUUIDs(8)
	children := &fakeChildren{duration: tenMinutes}
	b := newBulkEnv(t, machines, children)
	audited := audits(b.env)
	var before int
	b.env.RegisterDelayedCallback(func() { before = children.maxRunning }, 5*time.Minute)
	set := control(b.env, 5*time.Minute, workflows.SetWindowUpdate, workflows.ControlRequest{Window: 4, By: "alice"})
	var during workflows.BulkProgress
	b.env.RegisterDelayedCallback(func() { during = b.progress() }, 6*time.Minute)
	if _, err := b.run(bulkInput(1)); err != nil {
		t.Fatal(err)
	}
	if set.rejected != nil || set.state != (workflows.ControlState{Window: 4}) {
		t.Fatalf("set-window: %+v", set)
	}
	if before != 1 || children.maxRunning != 4 {
		t.Errorf("at most %d ran at once before and %d after set-window 4, want 1 and 4", before, children.maxRunning)
	}
	if during.Window != 4 || during.Running != 4 {
		t.Errorf("progress after set-window %+v", during)
	}
	equal(t, "audits", *audited, []activities.MoveControlAuditInput{{Region: "east", Control: apiControl("set-window", 4, "alice")}})
}

func TestControlValidatorRefusesBadRequests(t *testing.T) {
	children := &fakeChildren{duration: tenMinutes}
	b := newBulkEnv(t, machineUUIDs(3), children)
	audited := audits(b.env)
	tests := []struct {
		name string
		req  workflows.ControlRequest
		want string
	}{
		{workflows.ResumeUpdate, workflows.ControlRequest{By: "alice"}, "the run is not paused"},
		{workflows.SetWindowUpdate, workflows.ControlRequest{Window: 0, By: "alice"}, "window 0 is not between 1 and 50"},
		{workflows.SetWindowUpdate, workflows.ControlRequest{Window: workflows.MaxBulkWindow + 1, By: "alice"}, "window 51 is not between 1 and 50"},
		{workflows.PauseUpdate, workflows.ControlRequest{}, "who asks (By) is required"},
		{workflows.SetWindowUpdate, workflows.ControlRequest{Window: 1, By: "alice"}, "the run's window is already 1"},
	}
	var answers []*controlAnswer
	for _, tt := range tests {
		answers = append(answers, control(b.env, time.Minute, tt.name, tt.req))
	}
	control(b.env, 2*time.Minute, workflows.PauseUpdate, workflows.ControlRequest{By: "alice"})
	again := control(b.env, 3*time.Minute, workflows.PauseUpdate, workflows.ControlRequest{By: "bob"})
	control(b.env, 4*time.Minute, workflows.ResumeUpdate, workflows.ControlRequest{By: "alice"})
	if _, err := b.run(bulkInput(1)); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		checkRefusal(t, fmt.Sprintf("%s %+v", tt.name, tt.req), answers[i].rejected, tt.want)
	}
	checkRefusal(t, "second pause", again.rejected, "the run is already paused")
	if len(*audited) != 2 {
		t.Errorf("audited %+v, want only the accepted pause and resume", *audited)
	}
}

// checkRefusal fails unless rejected is a non-retryable UpdateRefused ApplicationError whose
// message, what the operator reads, is want.
func checkRefusal(t *testing.T, what string, rejected error, want string) {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(rejected, &app) || !app.NonRetryable() || app.Type() != workflows.ErrTypeUpdateRefused || app.Message() != want {
		t.Errorf("%s: got %v, want a non-retryable %s refusal saying %q", what, rejected, workflows.ErrTypeUpdateRefused, want)
	}
}

// TestBulkMigrateCarriesControlsAcrossContinueAsNew: a pause and a window set in one run
// hold in the next.
func TestBulkMigrateCarriesControlsAcrossContinueAsNew(t *testing.T) {
	machines := machineUUIDs(6)
	in := bulkInput(1)
	in.MachinesPerRun = 3
	children := &fakeChildren{duration: tenMinutes}
	b := newBulkEnv(t, machines, children)
	audits(b.env)
	control(b.env, time.Minute, workflows.SetWindowUpdate, workflows.ControlRequest{Window: 3, By: "alice"})
	control(b.env, 2*time.Minute, workflows.PauseUpdate, workflows.ControlRequest{By: "alice"})
	_, err := b.run(in)
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("got %v, want continue-as-new", err)
	}
	var next workflows.BulkMigrateInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Window != 3 || next.Continuation == nil || !next.Continuation.Paused {
		t.Fatalf("continued with window %d, continuation %+v", next.Window, next.Continuation)
	}

	// The next run starts nothing until resumed.
	children = &fakeChildren{duration: tenMinutes}
	b = newBulkEnv(t, machines, children)
	audits(b.env)
	var startedWhilePaused int
	var during workflows.BulkProgress
	b.env.RegisterDelayedCallback(func() { startedWhilePaused, during = len(children.started), b.progress() }, time.Hour)
	resumed := control(b.env, time.Hour+time.Minute, workflows.ResumeUpdate, workflows.ControlRequest{By: "bob"})
	res, err := b.run(next)
	if err != nil {
		t.Fatal(err)
	}
	if startedWhilePaused != 0 || !during.Paused || during.Window != 3 {
		t.Errorf("continued run while paused: %d started, progress %+v", startedWhilePaused, during)
	}
	if resumed.rejected != nil || children.maxRunning != 3 || res.Migrated != 6 {
		t.Errorf("after the resume: %+v, %d at once, result %+v", resumed, children.maxRunning, res)
	}
}

func TestTransferRackPauseAndSetWindow(t *testing.T) {
	machines := machineUUIDs(6)
	children := &fakeChildren{duration: tenMinutes}
	e := newTransferEnv(t, machines, children)
	paused := control(e.env, time.Minute, workflows.PauseUpdate, workflows.ControlRequest{By: "alice"})
	control(e.env, 2*time.Minute, workflows.SetWindowUpdate, workflows.ControlRequest{Window: 4, By: "alice"})
	var startedWhilePaused int
	var during workflows.TransferProgress
	e.env.RegisterDelayedCallback(func() { startedWhilePaused, during = len(children.started), e.progress() }, 30*time.Minute)
	control(e.env, 31*time.Minute, workflows.ResumeUpdate, workflows.ControlRequest{By: "bob"})
	if _, err := e.run(transferInput(1)); err != nil {
		t.Fatal(err)
	}
	if paused.rejected != nil || !paused.state.Paused {
		t.Fatalf("pause: %+v", paused)
	}
	if startedWhilePaused != 1 || !during.Paused || during.Window != 4 || during.MachinesDone != 1 {
		t.Errorf("while paused: %d started, progress %+v", startedWhilePaused, during)
	}
	if children.maxRunning != 4 || len(children.started) != len(machines) {
		t.Errorf("after the resume: %d at once, %d started", children.maxRunning, len(children.started))
	}
	equal(t, "audits", e.acts.controls, []string{"east transfer-rack/" + transferRack + " pause by alice", "east transfer-rack/" + transferRack + " set-window 4 by alice", "east transfer-rack/" + transferRack + " resume by bob"})
}

// A cancel reaches a run paused with nothing running: it ends cancelled, starting nothing.
func TestBulkMigrateCancelWhilePaused(t *testing.T) {
	machines := machineUUIDs(4)
	children := &fakeChildren{duration: tenMinutes}
	b := newBulkEnv(t, machines, children)
	audits(b.env)
	control(b.env, time.Minute, workflows.PauseUpdate, workflows.ControlRequest{By: "alice"})
	b.env.RegisterDelayedCallback(b.env.CancelWorkflow, time.Hour)
	_, err := b.run(bulkInput(2))
	if !temporal.IsCanceledError(err) {
		t.Fatalf("want a cancelled workflow, got %v", err)
	}
	if len(children.started) != 2 {
		t.Errorf("%d children started, want the 2 running at the pause", len(children.started))
	}
}
