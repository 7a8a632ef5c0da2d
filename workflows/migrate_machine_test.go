package workflows_test

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

const u = birdyUUID

func TestMigrateMachineHappyPath(t *testing.T) {
	f := newFixture(t)
	res, err := f.run(input())
	if err != nil {
		t.Fatal(err)
	}
	f.assertMigrated(false)
	want := workflows.MigrateMachineResult{MachineUuid: u, MachineName: "birdy", TargetEndpoint: "https://west.example:5240", Jobs: 2, Profiles: 2, StartedBy: "test-user"}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	equal(t, "activities", f.activities, []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "Activate"})
	equal(t, "region calls", f.journal.Calls(), []string{"east Quiesce " + u, "east Export " + u, "west MintTicket", "west Import " + u, "east FinalizeMigration " + u, "west Activate " + u})
	equal(t, "phases", f.phases, []string{"validating", "quiescing", "copying", "finalizing", "activating", "completed"})
	if p := f.progress(); p.Phase != workflows.PhaseCompleted || p.StepsDone != 5 || p.StepsTotal != 5 || len(p.Errors) != 0 {
		t.Errorf("progress %+v", p)
	}
}

func TestMigrateMachineSkipMachineDestroyFalseDeletesStub(t *testing.T) {
	f := newFixture(t)
	in := input()
	in.SkipMachineDestroy = new(false)
	res, err := f.run(in)
	if err != nil {
		t.Fatal(err)
	}
	f.assertMigrated(true)
	if !res.StubDeleted {
		t.Error("result does not report the stub deletion")
	}
	equal(t, "activities", f.activities, []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "Activate", "DeleteStub"})
}

func TestMigrateMachineUserTicket(t *testing.T) {
	f := newFixture(t)
	ticket, err := f.west.MintTicket(context.Background(), api.TicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	in := input()
	in.Ticket = ticket.Token
	if _, err := f.run(in); err != nil {
		t.Fatal(err)
	}
	f.assertMigrated(false)
	equal(t, "activities", f.activities, []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "Activate"})
}

// A step that fails for good runs exactly the compensations of the steps before it (and its
// own: a step may take effect even when its call fails), in reverse order, and leaves the
// source as it was.
func TestMigrateMachineStepFailureCompensates(t *testing.T) {
	const (
		validate = "ValidateMigration"
		quiesce  = "Quiesce"
		copying  = "ExportImport"
		finalize = "FinalizeMigration"
		activate = "Activate"
		wait     = "WaitForAgentCheckIn"
		restore  = "RestoreMigration"
		delCopy  = "UndoCopy"
		unq      = "Unquiesce"
		isActive = "IsActive"
	)
	tests := []struct {
		name      string
		region    string // "east" or "west"
		method    string // fake region method that answers 422
		agent     bool
		wantActs  []string
		wantPhase string // phase in which the failure happened (first progress error)
	}{
		{"mint", "west", "MintTicket", false, []string{validate, quiesce, copying, delCopy, unq}, "copying"},
		{"quiesce", "east", "Quiesce", false, []string{validate, quiesce, unq}, "quiescing"},
		{"export", "east", "Export", false, []string{validate, quiesce, copying, delCopy, unq}, "copying"},
		{"import", "west", "Import", false, []string{validate, quiesce, copying, delCopy, unq}, "copying"},
		{"finalize", "east", "FinalizeMigration", false, []string{validate, quiesce, copying, finalize, restore, delCopy, unq}, "finalizing"},
		{"repoint", "", "", true, []string{validate, quiesce, copying, finalize, wait, restore, delCopy, unq}, "repointing-agent"},
		{"activate", "west", "Activate", false, []string{validate, quiesce, copying, finalize, activate, isActive, restore, delCopy, unq}, "activating"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.agent {
				f.withAgent(func(context.Context, activities.AgentWaitInput) error {
					return temporal.NewNonRetryableApplicationError("agent did not check in", activities.ErrTypeAgentCheckInTimeout, nil)
				})
			}
			if tt.method != "" {
				f.region(tt.region).Fail(tt.method, http.StatusUnprocessableEntity, -1)
			}
			_, err := f.run(input())
			if err == nil {
				t.Fatal("workflow succeeded")
			}
			if typ := errorType(err); typ != activities.ErrTypeRegionRefused && typ != activities.ErrTypeAgentCheckInTimeout {
				t.Errorf("error type %q: %v", typ, err)
			}
			equal(t, "activities", f.activities, tt.wantActs)
			if tt.agent {
				f.east.Update(u, func(m *api.Machine) { delete(m.Meta, api.MetaAgentLastSeen) })
			}
			f.assertUntouched()
			p := f.progress()
			if p.Phase != workflows.PhaseFailed || len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0], tt.wantPhase+": ") {
				t.Errorf("progress %+v", p)
			}
		})
	}
}

// withAgent gives birdy an agent and mocks the wait for its check-in with wait.
func (f *fixture) withAgent(wait func(context.Context, activities.AgentWaitInput) error) {
	f.giveAgent()
	f.env.OnActivity(a.WaitForAgentCheckIn, mock.Anything, mock.Anything).Return(wait)
}

// withSlowAgent gives birdy an agent that checks in at the target after an hour.
func (f *fixture) withSlowAgent() {
	f.giveAgent()
	f.env.OnActivity(a.WaitForAgentCheckIn, mock.Anything, mock.Anything).After(time.Hour).Return(nil)
}

func (f *fixture) giveAgent() {
	f.east.Update(u, func(m *api.Machine) { m.Meta[api.MetaAgentLastSeen] = "2026-11-30T06:00:00Z" })
}

func TestMigrateMachineAgentRepoint(t *testing.T) {
	f := newFixture(t)
	var got activities.AgentWaitInput
	f.withAgent(func(_ context.Context, in activities.AgentWaitInput) error {
		got = in
		return nil
	})
	in := input()
	in.AgentCheckInTimeout = 10 * time.Minute
	start := f.env.Now()
	res, err := f.run(in)
	if err != nil {
		t.Fatal(err)
	}
	if !res.AgentRepointed {
		t.Error("result does not report the repointed agent")
	}
	if got.Region != "west" || got.Machine != u || got.Previous != "2026-11-30T06:00:00Z" || !got.Deadline.Equal(start.Add(10*time.Minute)) {
		t.Errorf("agent wait input %+v", got)
	}
	equal(t, "phases", f.phases, []string{"validating", "quiescing", "copying", "finalizing", "repointing-agent", "activating", "completed"})
}

func TestMigrateMachineProgressQueryWhileRunning(t *testing.T) {
	f := newFixture(t)
	var during workflows.Progress
	f.withSlowAgent()
	f.env.RegisterDelayedCallback(func() { during = f.progress() }, time.Minute)
	if _, err := f.run(input()); err != nil {
		t.Fatal(err)
	}
	if during.Phase != workflows.PhaseRepointing || during.StepsDone != 4 || during.StepsTotal != 6 || len(during.Errors) != 0 {
		t.Errorf("progress while waiting for the agent: %+v", during)
	}
}

func TestMigrateMachineCancelCompensates(t *testing.T) {
	f := newFixture(t)
	f.withSlowAgent()
	var rejected error
	f.env.RegisterDelayedCallback(func() {
		// While nothing is being undone an operator has nothing to retry or abandon.
		f.env.UpdateWorkflow(workflows.CompensationUpdate, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, workflows.CompensationRequest{Action: "retry", Reason: "early", By: "alice"})
	}, 30*time.Second)
	f.env.RegisterDelayedCallback(f.env.CancelWorkflow, time.Minute)
	_, err := f.run(input())
	if !temporal.IsCanceledError(err) {
		t.Fatalf("want a cancelled workflow, got %v", err)
	}
	equal(t, "activities", f.activities, []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "WaitForAgentCheckIn", "RestoreMigration", "UndoCopy", "Unquiesce"})
	equal(t, "region calls", f.journal.Calls(), []string{
		"east Quiesce " + u, "east Export " + u, "west MintTicket", "west Import " + u, "east FinalizeMigration " + u,
		"east RestoreMigration " + u, "west RedirectCopy " + u, "east Unquiesce " + u,
	})
	f.east.Update(u, func(m *api.Machine) { delete(m.Meta, api.MetaAgentLastSeen) })
	f.assertUntouched()
	if p := f.progress(); p.Phase != workflows.PhaseCanceled {
		t.Errorf("progress %+v", p)
	}
	if rejected == nil || !strings.Contains(rejected.Error(), "no compensation is failing") {
		t.Errorf("update while migrating: got %v, want a rejection", rejected)
	}
}

func TestMigrateMachineSkipMachineMigration(t *testing.T) {
	f := newFixture(t)
	// The machine was moved by hand: it is on west, its agent still talks to east.
	m := birdy()
	m.Meta[api.MetaAgentLastSeen] = "2026-11-30T06:00:00Z"
	f.west.Put(m)
	var waited bool
	f.env.OnActivity(a.WaitForAgentCheckIn, mock.Anything, mock.Anything).Return(func(context.Context, activities.AgentWaitInput) error {
		waited = true
		return nil
	})
	in := input()
	in.SkipMachineMigration = true
	res, err := f.run(in)
	if err != nil {
		t.Fatal(err)
	}
	if !waited || !res.AgentRepointed {
		t.Error("the agent was not repointed")
	}
	equal(t, "activities", f.activities, []string{"ValidateMigration", "WaitForAgentCheckIn"})
	equal(t, "region calls", f.journal.Calls(), nil)
}

func TestMigrateMachineWaitsForRunningJob(t *testing.T) {
	tests := []struct {
		name       string
		finishJob  time.Duration // 0: never
		wait       time.Duration
		wantErr    string
		validation int // ValidateMigration runs
	}{
		{"job ends within the wait", 45 * time.Second, 5 * time.Minute, "", 3},
		{"job outlives the wait", 0, 2 * time.Minute, workflows.ErrTypeJobRunning, 5},
		{"no wait", 0, 0, workflows.ErrTypeJobRunning, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.east.PutJobs(birdyJobs(api.JobRunning)...)
			if tt.finishJob > 0 {
				f.env.RegisterDelayedCallback(func() { f.east.PutJobs(birdyJobs(api.JobFinished)...) }, tt.finishJob)
			}
			in := input()
			in.WaitForRunningJob = tt.wait
			_, err := f.run(in)
			if typ := errorType(err); typ != tt.wantErr {
				t.Fatalf("error type %q, want %q: %v", typ, tt.wantErr, err)
			}
			runs := 0
			for _, act := range f.activities {
				if act == "ValidateMigration" {
					runs++
				}
			}
			if runs != tt.validation {
				t.Errorf("validated %d times, want %d", runs, tt.validation)
			}
			if tt.wantErr != "" {
				if !strings.Contains(err.Error(), "running job 1ed352bc-1303-63f2-94d2-19d9b7aba263") {
					t.Errorf("error does not name the job: %v", err)
				}
				equal(t, "region calls", f.journal.Calls(), nil)
				return
			}
			f.assertMigrated(false)
			if f.phases[1] != workflows.PhaseWaitingForJob {
				t.Errorf("phases %v", f.phases)
			}
		})
	}
}

func TestMigrateMachineRefusals(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(*fixture, *workflows.MigrateMachineInput)
		wantType string
		wantMsg  string
	}{
		{"empty input", func(_ *fixture, in *workflows.MigrateMachineInput) { *in = workflows.MigrateMachineInput{} },
			workflows.ErrTypeInvalidInput, "SourceRegion is empty"},
		{"unknown machine", func(_ *fixture, in *workflows.MigrateMachineInput) { in.Machine = "Name:nope" },
			activities.ErrTypeMachineNotFound, "machine Name:nope not found on region east"},
		{"unknown region", func(_ *fixture, in *workflows.MigrateMachineInput) { in.TargetRegion = "mars" },
			activities.ErrTypeUnknownRegion, `region "mars" is not in this worker's regions file`},
		{"same region", func(_ *fixture, in *workflows.MigrateMachineInput) { in.TargetRegion = "east" },
			activities.ErrTypeRegionMismatch, `source and target region are both "east"`},
		{"work order mode", func(f *fixture, _ *workflows.MigrateMachineInput) {
			f.east.Update(u, func(m *api.Machine) { m.WorkOrderMode = true })
		}, activities.ErrTypeWorkOrderMode, "WorkOrderMode"},
		{"already migrating", func(f *fixture, _ *workflows.MigrateMachineInput) {
			f.east.Update(u, func(m *api.Machine) { m.Meta[api.MetaMigrating] = "migrate-machine/other" })
		}, activities.ErrTypeAlreadyMigrating, "already being migrated by migrate-machine/other"},
		{"name conflict", func(f *fixture, _ *workflows.MigrateMachineInput) {
			f.west.Put(api.Machine{Uuid: "11111111-2222-3333-4444-555555555555", Name: "birdy"})
		}, activities.ErrTypeDestinationConflict, "Name birdy is used by machine birdy (11111111-2222-3333-4444-555555555555)"},
		{"MAC conflict", func(f *fixture, _ *workflows.MigrateMachineInput) {
			f.west.Put(api.Machine{Uuid: "11111111-2222-3333-4444-555555555555", Name: "robin", HardwareAddrs: []string{"52:54:00:12:34:56"}})
		}, activities.ErrTypeDestinationConflict, "HardwareAddrs 52:54:00:12:34:56 is used by machine robin"},
		{"forged ticket", func(_ *fixture, in *workflows.MigrateMachineInput) { in.Ticket = "forged" },
			activities.ErrTypeRegionRefused, "region west refused the import of machine " + u + ": ticket is not valid for region west"},
		{"replayed ticket", func(f *fixture, in *workflows.MigrateMachineInput) {
			tk, _ := f.west.MintTicket(context.Background(), api.TicketRequest{})
			spent := api.Machine{Uuid: "11111111-2222-3333-4444-555555555555", Name: "robin"}
			if _, err := f.west.Import(context.Background(), api.ImportRequest{Ticket: tk.Token, Bundle: api.Bundle{Machine: spent}}); err != nil {
				panic(err)
			}
			in.Ticket = tk.Token
		}, activities.ErrTypeRegionRefused, "ticket was already used"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			in := input()
			tt.setup(f, &in)
			before, _ := f.east.Machine(u)
			_, err := f.run(in)
			if typ := errorType(err); typ != tt.wantType || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %q %v, want %q containing %q", typ, err, tt.wantType, tt.wantMsg)
			}
			if after, _ := f.east.Machine(u); !reflect.DeepEqual(after, before) {
				t.Errorf("refused migration changed the source:\n got %+v\nwant %+v", after, before)
			}
			if m, ok := f.west.Machine(u); ok {
				t.Errorf("refused migration left %+v on the target", m)
			}
		})
	}
}

// 5xx answers are retried; the migration goes through.
func TestMigrateMachineRetriesUnavailableRegion(t *testing.T) {
	f := newFixture(t)
	f.east.Fail("Quiesce", http.StatusServiceUnavailable, 2)
	f.west.Fail("Import", http.StatusBadGateway, 1)
	if _, err := f.run(input()); err != nil {
		t.Fatal(err)
	}
	f.assertMigrated(false)
	equal(t, "region calls", f.journal.Calls(), []string{
		"east Quiesce " + u, "east Quiesce " + u, "east Quiesce " + u,
		"east Export " + u, "west MintTicket", "west Import " + u, "east Export " + u, "west MintTicket", "west Import " + u,
		"east FinalizeMigration " + u, "west Activate " + u,
	})
}

// A compensation that fails is retried with a backoff until it succeeds; after a few failures
// the phase says it is stuck, and it goes back to compensating when the undo goes through.
func TestMigrateMachineCompensationRetriesUntilItSucceeds(t *testing.T) {
	f := newFixture(t)
	f.east.Fail("FinalizeMigration", http.StatusUnprocessableEntity, -1)
	f.west.Fail("RedirectCopy", http.StatusForbidden, 4)
	start := f.env.Now()
	_, err := f.run(input())
	if typ := errorType(err); typ != activities.ErrTypeRegionRefused {
		t.Fatalf("error type %q: %v", typ, err)
	}
	equal(t, "activities", f.activities, []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "RestoreMigration",
		"UndoCopy", "UndoCopy", "UndoCopy", "UndoCopy", "UndoCopy", "Unquiesce"})
	equal(t, "phases", f.phases, []string{"validating", "quiescing", "copying", "finalizing", "compensating", "compensation-stuck", "compensating", "failed"})
	f.assertUntouched()
	// 30s + 1m + 2m + 4m of backoff between the five tries.
	if waited := f.env.Now().Sub(start); waited < 7*time.Minute+30*time.Second {
		t.Errorf("the retries took %s of workflow time, want the backoff's 7m30s at least", waited)
	}
	if p := f.progress(); p.Phase != workflows.PhaseFailed || len(p.Errors) != 4 || !strings.HasPrefix(p.Errors[1], "compensation delete-imported-copy: ") {
		t.Errorf("progress %+v", p)
	}
}

// An operator can abandon a stuck compensation with a reason; the request is validated and
// recorded, and the workflow fails naming what was not undone.
func TestMigrateMachineCompensationOperatorAbandons(t *testing.T) {
	f := newFixture(t)
	f.east.Fail("FinalizeMigration", http.StatusUnprocessableEntity, -1)
	f.west.Fail("RedirectCopy", http.StatusForbidden, -1)
	var rejected []string
	var accepted int
	update := func(req workflows.CompensationRequest) {
		f.env.UpdateWorkflow(workflows.CompensationUpdate, "", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { rejected = append(rejected, err.Error()) },
			OnAccept:   func() { accepted++ },
			OnComplete: func(any, error) {},
		}, req)
	}
	f.env.RegisterDelayedCallback(func() {
		update(workflows.CompensationRequest{Action: "abandon", By: "alice"})                          // no reason
		update(workflows.CompensationRequest{Action: "shrug", Reason: "why not", By: "alice"})         // no such action
		update(workflows.CompensationRequest{Action: "retry", Reason: "fixed the token", By: "alice"}) // accepted
	}, 5*time.Minute)
	f.env.RegisterDelayedCallback(func() {
		update(workflows.CompensationRequest{Action: "abandon", Reason: "copy removed by hand", By: "bob"})
	}, time.Hour)
	_, err := f.run(input())
	if typ := errorType(err); typ != workflows.ErrTypeCompensationFailed || !strings.Contains(err.Error(), "operator bob abandoned the compensation (copy removed by hand); not undone: delete-imported-copy, unquiesce") {
		t.Fatalf("error %q: %v", typ, err)
	}
	if accepted != 2 || len(rejected) != 2 {
		t.Errorf("accepted %d, rejected %v; want 2 accepted and 2 rejected", accepted, rejected)
	}
	p := f.progress()
	if len(p.Operator) != 2 || !strings.Contains(p.Operator[0], "alice asked to retry compensation delete-imported-copy: fixed the token") ||
		!strings.Contains(p.Operator[1], "bob asked to abandon") {
		t.Errorf("operator audit %v", p.Operator)
	}
	if p.Phase != workflows.PhaseFailed || !slices.Equal(p.Pending, []string{"delete-imported-copy", "unquiesce"}) {
		t.Errorf("progress %+v", p)
	}
	// Each decision the workflow acted on is in the source region's audit log.
	var audited []string
	for _, c := range f.journal.Calls() {
		if strings.Contains(c, "RecordCompensationDecision") {
			audited = append(audited, c)
		}
	}
	equal(t, "audited decisions", audited, []string{"east RecordCompensationDecision " + birdyUUID + " retry by alice", "east RecordCompensationDecision " + birdyUUID + " abandon by bob"})
}

// Once the machine is active on the target nothing is undone; a failure to delete the stub
// is reported as such.
func TestMigrateMachineStubDeleteFailureKeepsMigration(t *testing.T) {
	f := newFixture(t)
	f.east.Fail("DeleteMachine", http.StatusConflict, -1)
	in := input()
	in.SkipMachineDestroy = new(false)
	_, err := f.run(in)
	if typ := errorType(err); typ != workflows.ErrTypeAfterActivation || !strings.Contains(err.Error(), "is active on west") {
		t.Fatalf("error %q: %v", typ, err)
	}
	equal(t, "activities", f.activities, []string{"ValidateMigration", "Quiesce", "ExportImport", "FinalizeMigration", "Activate", "DeleteStub"})
	f.assertMigrated(false)
}

// The wait for a running job stays far below Temporal's history limit: a wait above
// MaxWaitForRunningJob is refused, and the re-checks of a job that never ends space out.
func TestMigrateMachineBoundsTheJobWait(t *testing.T) {
	t.Run("wait above the bound", func(t *testing.T) {
		f := newFixture(t)
		f.east.PutJobs(birdyJobs(api.JobRunning)...)
		in := input()
		in.WaitForRunningJob = workflows.MaxWaitForRunningJob + time.Hour
		if _, err := f.run(in); errorType(err) != workflows.ErrTypeInvalidInput {
			t.Fatalf("error %v, want the wait refused", err)
		}
	})
	t.Run("a day's wait", func(t *testing.T) {
		f := newFixture(t)
		f.east.PutJobs(birdyJobs(api.JobRunning)...)
		in := input()
		in.WaitForRunningJob = 24 * time.Hour
		if _, err := f.run(in); errorType(err) != workflows.ErrTypeJobRunning {
			t.Fatalf("error %v, want the job still running", err)
		}
		// Every 30 s that would be 2881 checks; at most every 10 min, under 200.
		if runs := countOf(f.activities, "ValidateMigration"); runs > 200 {
			t.Errorf("validated %d times in a day's wait, want at most 200", runs)
		}
	})
}

// An undo stuck for days backs off to hours between tries.
func TestMigrateMachineStuckUndoBacksOff(t *testing.T) {
	f := newFixture(t)
	f.east.Fail("FinalizeMigration", http.StatusUnprocessableEntity, -1)
	f.west.Fail("RedirectCopy", http.StatusForbidden, -1)
	f.env.RegisterDelayedCallback(func() {
		f.env.UpdateWorkflow(workflows.CompensationUpdate, "", &testsuite.TestUpdateCallback{OnReject: func(error) {}, OnAccept: func() {}, OnComplete: func(any, error) {}},
			workflows.CompensationRequest{Action: workflows.CompensationAbandon, Reason: "two days stuck", By: "bob"})
	}, 48*time.Hour)
	if _, err := f.run(input()); errorType(err) != workflows.ErrTypeCompensationFailed {
		t.Fatalf("error %v, want the abandoned undo", err)
	}
	// Every 10 min that would be some 290 tries in two days; backing off to 4 h, under 30.
	if tries := countOf(f.activities, "UndoCopy"); tries > 30 {
		t.Errorf("the stuck undo was tried %d times in two days, want at most 30", tries)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}
