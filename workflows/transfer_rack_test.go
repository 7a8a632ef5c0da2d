package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

const transferRack = "aaaaaaaa-0000-4000-8000-00000000000a"

// transferActs fakes the transfer's region activities (registered under their method
// names).
// Calls are recorded in order; an activity named in fail fails for good.
type transferActs struct {
	t        *testing.T
	machines []string
	fail     map[string]bool
	// rackRegion is the region the rack reports; a move that fails leaves it unchanged.
	rackRegion string
	// batchMoves has MigrateBatch move its machines, but those in batchFail and batchLeave
	// (left to the per-machine path); otherwise it leaves them all to the per-machine path,
	// as for machines with an agent.
	batchMoves bool
	batchFail  map[string]bool
	batchLeave map[string]bool

	// pauseHeld, when set, is closed by PauseRack, which then waits for pauseRelease: the
	// pause in flight when the transfer is cancelled.
	pauseHeld, pauseRelease chan struct{}

	mu       sync.Mutex
	calls    []string
	controls []string // AuditMoveControl calls
	failed   int      // failures told by fail so far
	batches  []activities.BatchInput
	drains   []activities.DrainInput
	moved    map[string]bool // by the batches
}

var (
	transferIn = activities.TransferInput{SourceRegion: "east", TargetRegion: "west", Rack: transferRack}
	sourceRack = activities.RackRef{Region: "east", Rack: transferRack}
	targetRack = activities.RackRef{Region: "west", Rack: transferRack}
)

func newTransferActs(t *testing.T, machines []string) *transferActs {
	return &transferActs{t: t, machines: machines, fail: map[string]bool{}, batchFail: map[string]bool{}, batchLeave: map[string]bool{}, moved: map[string]bool{}, rackRegion: "east"}
}

// call records name after checking its input, and fails when told to.
func (f *transferActs) call(name string, got, want any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if got != want {
		f.t.Errorf("%s input %+v, want %+v", name, got, want)
	}
	f.calls = append(f.calls, name)
	if f.fail[name] {
		f.failed++
		return temporal.NewNonRetryableApplicationError(name+" refused", "Refused", nil)
	}
	return nil
}

// setFail makes activity name fail for good, or succeed again.
func (f *transferActs) setFail(name string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[name] = fail
}

// failures is how many calls failed as told so far.
func (f *transferActs) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *transferActs) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *transferActs) ValidateTransfer(_ context.Context, in activities.TransferInput) (activities.TransferPlan, error) {
	plan := activities.TransferPlan{RackName: "rack-a", Machines: f.machines, VLANs: 1, Subnets: 1, TargetURL: "https://west.example:5240", TargetEndpoints: []string{"https://west.example:5240"}}
	return plan, f.call("ValidateTransfer", in, transferIn)
}

func (f *transferActs) PauseRack(_ context.Context, ref activities.RackRef) error {
	if f.pauseHeld != nil {
		close(f.pauseHeld)
		<-f.pauseRelease
	}
	return f.call("PauseRack", ref, sourceRack)
}

func (f *transferActs) UnpauseRack(_ context.Context, ref activities.RackRef) error {
	return f.call("UnpauseRack", ref, sourceRack)
}

func (f *transferActs) CopyRack(_ context.Context, in activities.TransferInput) (api.RackImport, error) {
	return api.RackImport{Fabrics: 1, VLANs: 1, Subnets: 1, Leases: 3, Created: 4}, f.call("CopyRack", in, transferIn)
}

func (f *transferActs) UndoRackCopy(_ context.Context, ref activities.RackRef) error {
	return f.call("UndoRackCopy", ref, targetRack)
}

// MigrateBatch fakes the batched path (activities.MigrateBatch); batches records its inputs.
func (f *transferActs) MigrateBatch(_ context.Context, in activities.BatchInput) (activities.BatchResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, in)
	var res activities.BatchResult
	for _, m := range in.Machines {
		switch {
		case f.batchFail[m]:
			res.Failed = append(res.Failed, activities.BatchFailure{Machine: m, Type: activities.ErrTypeDestinationConflict, Error: "machine " + m + " refused by the target", Undone: true})
		case f.batchMoves && !f.batchLeave[m]:
			res.Moved = append(res.Moved, m)
			f.moved[m] = true
		default:
			res.PerMachine = append(res.PerMachine, m)
		}
	}
	return res, nil
}

// DrainRackJobs fakes the drain: drains records its inputs.
func (f *transferActs) DrainRackJobs(_ context.Context, in activities.DrainInput) (activities.DrainResult, error) {
	f.mu.Lock()
	f.drains = append(f.drains, in)
	f.mu.Unlock()
	return activities.DrainResult{Polls: 1}, f.call("DrainRackJobs", activities.RackRef{Region: in.Region, Rack: in.Rack}, sourceRack)
}

// RackMachines lists the rack's machines on the source: those the batches did not move,
// after in.After in UUID order.
func (f *transferActs) RackMachines(_ context.Context, in activities.RackMachinesInput) ([]string, error) {
	f.mu.Lock()
	var left []string
	for _, m := range slices.Sorted(slices.Values(f.machines)) {
		if !f.moved[m] && m > in.After {
			left = append(left, m)
		}
	}
	f.mu.Unlock()
	return left[:min(len(left), in.Limit)], f.call("RackMachines", activities.RackRef{Region: in.Region, Rack: in.Rack}, sourceRack)
}

// AuditMoveControl records the audit of an operator's control.
func (f *transferActs) AuditMoveControl(_ context.Context, in activities.MoveControlAuditInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := in.Control
	action := c.Action
	if c.Window > 0 {
		action += fmt.Sprint(" ", c.Window)
	}
	f.controls = append(f.controls, in.Region+" "+c.Migration+" "+action+" by "+c.By)
	return nil
}

func (f *transferActs) HandOverRack(_ context.Context, ref activities.RackRef) error {
	return f.call("HandOverRack", ref, sourceRack)
}

func (f *transferActs) ReleaseRack(_ context.Context, in activities.TransferInput) (activities.ReleaseResult, error) {
	return activities.ReleaseResult{Released: 2}, f.call("ReleaseRack", in, transferIn)
}

// fakeRack is the rack controller behind the real rack-local activities; it records its
// calls with the transfer's activities.
type fakeRack struct{ *transferActs }

// State implements rackacts.Controller.
func (f fakeRack) State() rackacts.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return rackacts.State{Uuid: transferRack, Name: "rack-a", Region: f.rackRegion, Endpoints: []string{"https://" + f.rackRegion + ".example:5240"}}
}

// ExportLeases implements rackacts.Controller; its failures are the rack's, which retry.
func (f fakeRack) ExportLeases(context.Context) (int, error) {
	if err := f.call("ExportLeases", nil, nil); err != nil {
		return 0, errors.New(err.Error())
	}
	return 3, nil
}

// MoveToRegion implements rackacts.Controller.
func (f fakeRack) MoveToRegion(_ context.Context, urls []string, secret string) (api.Info, error) {
	if secret != "west-secret" || !slices.Equal(urls, []string{"https://west.example:5240"}) {
		f.t.Errorf("MoveToRegion(%v, %q)", urls, secret)
	}
	if err := f.call("SwapRegionEndpoints", nil, nil); err != nil {
		return api.Info{}, refused{err}
	}
	f.mu.Lock()
	f.rackRegion = "west"
	f.mu.Unlock()
	return api.Info{Name: "west"}, nil
}

// refused is a registration the region refused: retrying cannot help.
type refused struct{ error }

func (refused) Permanent() bool { return true }

// transferEnv runs TransferRack in the test environment over transferActs and fake
// children (fakeChildren of bulk_migrate_test.go) for the machines.
type transferEnv struct {
	t        *testing.T
	env      *testsuite.TestWorkflowEnvironment
	children *fakeChildren
	acts     *transferActs
	phases   []string
}

func newTransferEnv(t *testing.T, machines []string, children *fakeChildren) *transferEnv {
	return newTransferEnvOver(t, newTransferActs(t, machines), children)
}

// newTransferEnvOver is newTransferEnv over acts, which may have served an earlier run.
func newTransferEnvOver(t *testing.T, acts *transferActs, children *fakeChildren) *transferEnv {
	var suite testsuite.WorkflowTestSuite
	e := &transferEnv{t: t, env: suite.NewTestWorkflowEnvironment(), children: children, acts: acts}
	e.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.TransferRackID(transferRack)})
	registerTransfer(e.env, e.env, e.acts, children)
	e.env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		if phase, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(workflows.MigrationPhaseKey); ok {
			e.phases = append(e.phases, phase)
		}
	})
	return e
}

// registerTransfer registers TransferRack, the fake children and activities on r, and the
// real rack-local activities over acts on rack (the rack's own worker).
func registerTransfer(r, rack worker.Registry, acts *transferActs, children *fakeChildren) {
	r.RegisterWorkflow(workflows.TransferRack)
	r.RegisterWorkflow(workflows.MigrateMachineBatch)
	r.RegisterWorkflowWithOptions(children.migrate, workflow.RegisterOptions{Name: "MigrateMachine"})
	r.RegisterActivity(acts)
	rack.RegisterActivity(rackacts.New(fakeRack{acts}, map[string]string{"west": "west-secret"}, rackacts.Pods{}))
}

func (e *transferEnv) run(in workflows.TransferRackInput) (workflows.TransferRackResult, error) {
	e.t.Helper()
	e.env.ExecuteWorkflow(workflows.TransferRack, in)
	if !e.env.IsWorkflowCompleted() {
		e.t.Fatal("workflow did not complete")
	}
	var res workflows.TransferRackResult
	if err := e.env.GetWorkflowError(); err != nil {
		return res, err
	}
	if err := e.env.GetWorkflowResult(&res); err != nil {
		e.t.Fatal(err)
	}
	return res, nil
}

func (e *transferEnv) progress() workflows.TransferProgress {
	e.t.Helper()
	v, err := e.env.QueryWorkflow(workflows.ProgressQuery)
	if err != nil {
		e.t.Fatalf("progress query: %v", err)
	}
	var p workflows.TransferProgress
	if err := v.Get(&p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func transferInput(window int) workflows.TransferRackInput {
	return workflows.TransferRackInput{SourceRegion: "east", TargetRegion: "west", Rack: transferRack, Window: window}
}

func oneMinute(string) time.Duration { return time.Minute }

func TestTransferRackHappyPath(t *testing.T) {
	machines := machineUUIDs(3)
	children := &fakeChildren{duration: oneMinute}
	e := newTransferEnv(t, machines, children)
	in := transferInput(0)
	in.WaitForRunningJob = 7 * time.Minute
	res, err := e.run(in)
	if err != nil {
		t.Fatal(err)
	}
	want := workflows.TransferRackResult{RackName: "rack-a", Machines: 3, Copied: api.RackImport{Fabrics: 1, VLANs: 1, Subnets: 1, Leases: 3, Created: 4}, Released: 2}
	if res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	equal(t, "activities", e.acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"})
	equal(t, "phases", e.phases, []string{"validating", "pausing-rack", "draining-jobs", "copying-network", "migrating-machines", "repointing-rack", "removing-rack-from-source", "releasing-operations", "completed"})
	wantIDs := make([]string, len(machines))
	for i, m := range machines {
		wantIDs[i] = workflows.MigrateMachineID(m)
	}
	equal(t, "children", slices.Sorted(slices.Values(children.started)), wantIDs)
	for _, in := range children.inputs {
		if in.SourceRegion != "east" || in.TargetRegion != "west" || in.WaitForRunningJob != 7*time.Minute {
			t.Errorf("child input %+v", in)
		}
	}
	if p := e.progress(); p.Phase != workflows.PhaseCompleted || p.MachinesTotal != 3 || p.MachinesDone != 3 || p.MachinesFailed != 0 || len(p.Errors) != 0 {
		t.Errorf("progress %+v", p)
	}
}

// A step that fails for good runs exactly the undos of the steps before it and its own, in
// reverse order; after the repoint nothing is undone.
func TestTransferRackStepFailureCompensates(t *testing.T) {
	forward := []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack"}
	cases := []struct {
		name      string
		fail      string
		failChild bool
		calls     []string
		errType   string // "" for a retried failure, whose type is the error's Go type
	}{
		{"validate", "ValidateTransfer", false, []string{"ValidateTransfer"}, "Refused"},
		{"pause", "PauseRack", false, []string{"ValidateTransfer", "PauseRack", "UnpauseRack"}, "Refused"},
		{"drain", "DrainRackJobs", false, []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "UnpauseRack"}, "Refused"},
		{"lease export", "ExportLeases", false, slices.Concat(forward[:3], slices.Repeat([]string{"ExportLeases"}, 10), []string{"UndoRackCopy", "UnpauseRack"}), ""},
		{"copy", "CopyRack", false, append(forward[:5:5], "UndoRackCopy", "UnpauseRack"), "Refused"},
		{"machine", "", true, append(forward[:5:5], "UndoRackCopy", "UnpauseRack"), workflows.ErrTypeMachinesFailed},
		{"repoint", "SwapRegionEndpoints", false, append(forward[:5:5], "SwapRegionEndpoints", "UndoRackCopy", "UnpauseRack"), rackacts.ErrTypeRegistrationRefused},
		{"hand-over", "HandOverRack", false, append(forward[:5:5], "SwapRegionEndpoints", "HandOverRack"), workflows.ErrTypeAfterActivation},
		{"release", "ReleaseRack", false, append(forward[:5:5], "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"), workflows.ErrTypeAfterActivation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			machines := machineUUIDs(4)
			children := &fakeChildren{duration: oneMinute, fail: map[string]bool{}}
			if c.failChild {
				children.fail[machines[1]] = true
			}
			e := newTransferEnv(t, machines, children)
			e.acts.fail[c.fail] = true
			_, err := e.run(transferInput(2))
			if err == nil {
				t.Fatal("transfer succeeded")
			}
			if got := errorType(err); c.errType != "" && got != c.errType {
				t.Errorf("error type %q, want %q: %v", got, c.errType, err)
			}
			equal(t, "activities", e.acts.recorded(), c.calls)
			p := e.progress()
			if p.Phase != workflows.PhaseFailed || len(p.Errors) == 0 {
				t.Errorf("progress %+v", p)
			}
			if c.failChild && (p.MachinesFailed != 1 || p.MachinesDone+p.MachinesFailed != len(children.started) || len(children.started) == len(machines)) {
				t.Errorf("progress %+v after children %v: want one failure and no children started after it", p, children.started)
			}
		})
	}
}

// A repoint whose answer was lost but which took effect (the rack reports the target as its
// region) is not undone: the transfer goes on.
func TestTransferRackRepointThatTookEffectContinues(t *testing.T) {
	e := newTransferEnv(t, machineUUIDs(1), &fakeChildren{duration: oneMinute})
	e.acts.fail["SwapRegionEndpoints"] = true
	e.acts.rackRegion = "west" // the rack moved, its answer was lost
	if _, err := e.run(transferInput(0)); err != nil {
		t.Fatal(err)
	}
	equal(t, "activities", e.acts.recorded(), []string{"ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"})
}

func TestTransferRackWindow(t *testing.T) {
	for _, c := range []struct{ window, machines, want int }{{0, 12, workflows.DefaultTransferWindow}, {3, 12, 3}, {20, 7, 7}, {1, 4, 1}} {
		children := &fakeChildren{duration: staggered}
		e := newTransferEnv(t, machineUUIDs(c.machines), children)
		if _, err := e.run(transferInput(c.window)); err != nil {
			t.Fatal(err)
		}
		if children.maxRunning != c.want || len(children.started) != c.machines {
			t.Errorf("window %d over %d machines: %d ran at once, %d started; want %d at once", c.window, c.machines, children.maxRunning, len(children.started), c.want)
		}
	}
}

func TestTransferRackRefusesBadInput(t *testing.T) {
	cases := map[string]workflows.TransferRackInput{
		"no source":            {TargetRegion: "west", Rack: transferRack},
		"same region":          {SourceRegion: "east", TargetRegion: "east", Rack: transferRack},
		"rack not a UUID":      {SourceRegion: "east", TargetRegion: "west", Rack: "rack-a"},
		"negative window":      {SourceRegion: "east", TargetRegion: "west", Rack: transferRack, Window: -1},
		"window above the cap": {SourceRegion: "east", TargetRegion: "west", Rack: transferRack, Window: workflows.MaxBulkWindow + 1},
		"negative job wait":    {SourceRegion: "east", TargetRegion: "west", Rack: transferRack, WaitForRunningJob: -time.Second},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			e := newTransferEnv(t, nil, &fakeChildren{duration: oneMinute})
			_, err := e.run(in)
			if got := errorType(err); got != workflows.ErrTypeInvalidInput {
				t.Fatalf("error %v (type %q), want %s", err, got, workflows.ErrTypeInvalidInput)
			}
			if len(e.acts.recorded()) != 0 {
				t.Errorf("calls %v for a refused input", e.acts.recorded())
			}
		})
	}
}

// An undo of a transfer that keeps failing is the operator's to retry or abandon through the
// compensation Update, as on MigrateMachine: abandoned, the transfer fails naming what was
// not undone, and the request is in its progress.
func TestTransferRackCompensationOperatorAbandons(t *testing.T) {
	e := newTransferEnv(t, machineUUIDs(2), &fakeChildren{duration: oneMinute})
	e.acts.fail["CopyRack"] = true
	e.acts.fail["UnpauseRack"] = true
	var rejected error
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(workflows.CompensationUpdate, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, workflows.CompensationRequest{Action: workflows.CompensationAbandon, Reason: "unpaused by hand", By: "bob"})
	}, time.Hour)
	e.env.SetTestTimeout(30 * time.Second) // a transfer without the Update retries its undo for ever
	_, err := e.run(transferInput(2))
	if rejected != nil {
		t.Fatalf("compensation update rejected: %v", rejected)
	}
	if typ := errorType(err); typ != workflows.ErrTypeCompensationFailed || !strings.Contains(err.Error(), "operator bob abandoned the compensation (unpaused by hand); not undone: unpause-rack-on-source") {
		t.Fatalf("error %q: %v", typ, err)
	}
	if p := e.progress(); p.Phase != workflows.PhaseFailed || len(p.Operator) != 1 || !strings.Contains(p.Operator[0], "bob asked to abandon compensation unpause-rack-on-source: unpaused by hand") {
		t.Errorf("progress %+v", p)
	}
}
