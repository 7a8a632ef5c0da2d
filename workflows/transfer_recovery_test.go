package workflows_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// leftoverState is what the regions of a transferActs hold of a closed run, for the tests of
// this file: transferActs cannot grow fields without touching every transfer test.
type leftoverState struct {
	leftover activities.RackLeftover
	steps    []activities.RackRecoveryStep
}

var (
	leftoversMu sync.Mutex
	leftovers   = map[*transferActs]*leftoverState{}
)

// withLeftover has f's regions hold l (a zero l: nothing left, but the search is recorded).
func withLeftover(f *transferActs, l activities.RackLeftover) *leftoverState {
	leftoversMu.Lock()
	defer leftoversMu.Unlock()
	st := &leftoverState{leftover: l}
	leftovers[f] = st
	return st
}

func leftoverOf(f *transferActs) *leftoverState {
	leftoversMu.Lock()
	defer leftoversMu.Unlock()
	return leftovers[f]
}

// FindRackLeftovers finds what withLeftover set; for the other transfer tests it finds
// nothing and is not recorded, so they see only their own steps.
func (f *transferActs) FindRackLeftovers(_ context.Context, q activities.RackLeftoverQuery) (activities.RackLeftovers, error) {
	st := leftoverOf(f)
	if st == nil {
		return activities.RackLeftovers{}, nil
	}
	if q.Rack != transferRack || len(q.Regions) == 0 {
		f.t.Errorf("FindRackLeftovers(%+v)", q)
	}
	if err := f.call("FindRackLeftovers", nil, nil); err != nil {
		return activities.RackLeftovers{}, err
	}
	leftoversMu.Lock()
	defer leftoversMu.Unlock()
	if st.leftover.Run == "" {
		return activities.RackLeftovers{}, nil
	}
	return activities.RackLeftovers{Leftovers: []activities.RackLeftover{st.leftover}, StartedBy: "alice"}, nil
}

func (f *transferActs) RecoverRackLeftover(_ context.Context, step activities.RackRecoveryStep) (activities.RackRecoveryResult, error) {
	st := leftoverOf(f)
	if st == nil {
		f.t.Error("RecoverRackLeftover without a leftover")
		return activities.RackRecoveryResult{}, nil
	}
	leftoversMu.Lock()
	st.steps = append(st.steps, step)
	st.leftover = activities.RackLeftover{} // recovered
	leftoversMu.Unlock()
	return activities.RackRecoveryResult{Actions: []string{"east: unpause"}}, f.call("RecoverRackLeftover", nil, nil)
}

func (st *leftoverState) recorded() []activities.RackRecoveryStep {
	leftoversMu.Lock()
	defer leftoversMu.Unlock()
	return slices.Clone(st.steps)
}

// staleRun is a closed transfer run east→west that copied the rack and, with registered, got
// as far as the repoint.
func staleRun(registered bool) activities.RackLeftover {
	hold := api.RackHold{Transfer: workflows.TransferRackID(transferRack), Run: "closed-run", From: "east", To: "west"}
	src, dst := hold, hold
	src.Role, dst.Role = api.TransferSource, api.TransferTarget
	return activities.RackLeftover{Rack: transferRack, Transfer: hold.Transfer, Run: hold.Run, From: "east", To: "west",
		SourceHold: src, TargetHold: dst, SourceExists: true, TargetRegistered: registered}
}

func newLeftoverEnv(t *testing.T, leftover activities.RackLeftover) (*transferEnv, *leftoverState) {
	e := newTransferEnv(t, machineUUIDs(1), &fakeChildren{duration: oneMinute})
	return e, withLeftover(e.acts, leftover)
}

// A transfer first recovers what a closed run of the rack left, then moves the rack: undone
// when that run never reached the repoint, and, when it did, undone or finished as the rack
// itself says where it serves from.
func TestTransferRackRecoversLeftoverFirst(t *testing.T) {
	cases := []struct {
		name       string
		registered bool
		rackIn     string
		finish     bool
	}{
		{"before the repoint", false, "east", false},
		{"repointed, rack still on the source", true, "east", false},
		{"repointed, rack on the target", true, "west", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, acts := newLeftoverEnv(t, staleRun(c.registered))
			e.acts.rackRegion = c.rackIn // the fake rack moves to west again on the repoint
			if _, err := e.run(transferInput(0)); err != nil {
				t.Fatal(err)
			}
			calls := e.acts.recorded()
			if len(calls) < 2 || calls[0] != "FindRackLeftovers" || calls[1] != "RecoverRackLeftover" {
				t.Fatalf("calls %v: want the leftover found and recovered before anything else", calls)
			}
			if len(acts.recorded()) != 1 || acts.recorded()[0].Finish != c.finish || acts.recorded()[0].StartedBy != "alice" {
				t.Errorf("recovery steps %+v, want one with Finish=%v by alice", acts.recorded(), c.finish)
			}
			if e.phases[0] != workflows.PhaseRecovering {
				t.Errorf("phases %v, want %s first", e.phases, workflows.PhaseRecovering)
			}
		})
	}
}

// With nothing left, a transfer does what it always did.
func TestTransferRackWithoutLeftover(t *testing.T) {
	e, acts := newLeftoverEnv(t, activities.RackLeftover{})
	if _, err := e.run(transferInput(0)); err != nil {
		t.Fatal(err)
	}
	equal(t, "activities", e.acts.recorded(), []string{"FindRackLeftovers", "ValidateTransfer", "PauseRack", "DrainRackJobs", "ExportLeases", "CopyRack", "SwapRegionEndpoints", "HandOverRack", "ReleaseRack"})
	if len(acts.recorded()) != 0 || e.phases[0] != "validating" {
		t.Errorf("steps %+v, phases %v", acts.recorded(), e.phases)
	}
}

// A failed search for leftovers (a refused grant, a rack held by another workflow) fails the
// transfer before it changes anything.
func TestTransferRackLeftoverSearchRefusedChangesNothing(t *testing.T) {
	e, _ := newLeftoverEnv(t, staleRun(false))
	e.acts.fail["FindRackLeftovers"] = true
	if _, err := e.run(transferInput(0)); errorType(err) != "Refused" {
		t.Fatalf("error %v, want the refusal", err)
	}
	equal(t, "activities", e.acts.recorded(), []string{"FindRackLeftovers"})
}

// RecoverRackTransfer reports what it recovered, and a transfer recovers first, on a real
// server; with -record it writes both histories for TestReplayTransferRackHistories.
func TestRecoverRackTransferOnDevServer(t *testing.T) {
	c := devServer(t)
	fakes := newTransferActs(t, machineUUIDs(1))
	acts := withLeftover(fakes, staleRun(false))
	children := &fakeChildren{duration: func(string) time.Duration { return 10 * time.Millisecond }}
	startTransferWorkers(t, c, fakes, children, workflows.RecoverRackTransfer)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := workflows.RecoverRackInput{Rack: transferRack, Regions: []string{"east"}, StartedBy: "alice"}

	opts := client.StartWorkflowOptions{ID: workflows.TransferRackID(transferRack), TaskQueue: workflows.TaskQueue}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.RecoverRackTransfer, in)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.RecoverRackResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Recovered) != 1 || res.Recovered[0].Outcome != api.RecoveryUndone || res.Recovered[0].Run != "closed-run" {
		t.Errorf("result %+v", res)
	}
	if len(acts.recorded()) != 1 || acts.recorded()[0].StartedBy != "alice" {
		t.Errorf("steps %+v", acts.recorded())
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "recover_rack_history.json"))
	}

	leftoversMu.Lock()
	acts.leftover = staleRun(false)
	leftoversMu.Unlock()
	run, err = c.ExecuteWorkflow(ctx, opts, workflows.TransferRack, transferInput(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(acts.recorded()) != 2 {
		t.Errorf("the transfer did not recover first: steps %+v", acts.recorded())
	}
	if *record {
		writeHistory(ctx, t, c, run, filepath.Join(transferHistoryDir, "transfer_rack_recovery_history.json"))
	}
}
