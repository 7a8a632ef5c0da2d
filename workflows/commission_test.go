package workflows_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

const commissionedMachine = "c0000000-0000-4000-8000-000000000001"

// commissionRack stands in for the rack's power and commissioning activities (same names): a
// machine behind a BMC and its record on the region, in memory. Once powered on, the machine
// enlists after bootPolls reads of its state (never when bootPolls is negative).
type commissionRack struct {
	mu        sync.Mutex
	calls     []string
	power     api.PowerStatus
	status    string
	reason    string
	inventory bool
	bootPolls int
	polls     int
	reads     int // of the machine's state, every one
	away      int // reads that fail as while the rack restarts
}

func newCommissionRack(bootPolls int) *commissionRack {
	return &commissionRack{power: api.PowerStateOff, status: api.StatusNew, bootPolls: bootPolls}
}

func (r *commissionRack) enter(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, name)
}

func (r *commissionRack) journal() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *commissionRack) VerifyPowerGrant(_ context.Context, in rackacts.PowerGrantInput) (rackacts.PodGrantResult, error) {
	r.enter("VerifyPowerGrant")
	return rackacts.PodGrantResult{GrantedTo: "alice"}, nil
}

func (r *commissionRack) PowerMachine(_ context.Context, in rackacts.PowerMachineInput) (rackacts.PowerMachineResult, error) {
	r.enter("PowerMachine " + string(in.Action))
	r.mu.Lock()
	defer r.mu.Unlock()
	switch in.Action {
	case api.PowerOn, api.PowerCycle:
		r.power, r.polls = api.PowerStateOn, 0
	case api.PowerOff:
		r.power = api.PowerStateOff
	}
	return rackacts.PowerMachineResult{State: r.power}, nil
}

func (r *commissionRack) MachineCommissioning(_ context.Context, in rackacts.CommissionMachineInput) (rackacts.CommissionState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	if r.away > 0 {
		r.away--
		return rackacts.CommissionState{}, errors.New("the rack's region link is down")
	}
	if r.power == api.PowerStateOn && r.bootPolls >= 0 {
		r.polls++
		if r.polls > r.bootPolls {
			r.inventory = true
		}
	}
	return rackacts.CommissionState{Status: r.status, Enlisted: r.inventory, Scripts: 2}, nil
}

func (r *commissionRack) SetCommissionStatus(_ context.Context, in rackacts.SetCommissionStatusInput) error {
	r.enter("SetCommissionStatus " + in.Status)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case in.Status == api.StatusCommissioning:
		r.inventory = false
	case in.Status == api.StatusReady && !r.inventory:
		return temporal.NewNonRetryableApplicationError("no inventory", rackacts.ErrTypeRegionRefused, nil)
	}
	r.status, r.reason = in.Status, in.Reason
	return nil
}

func commissionInput() workflows.CommissionMachineInput {
	return workflows.CommissionMachineInput{Machine: commissionedMachine, Rack: podRackUUID, Grant: "grant"}
}

func commissionEnv(r *commissionRack) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.CommissionMachineID(commissionedMachine)})
	env.RegisterWorkflow(workflows.CommissionMachine)
	env.RegisterActivity(r)
	return env
}

// A machine that boots and enlists is powered off and recorded Ready, after the status went
// to Commissioning (which drops its old inventory) before any power action.
func TestCommissionMachineMakesItReady(t *testing.T) {
	r := newCommissionRack(3)
	env := commissionEnv(r)
	env.ExecuteWorkflow(workflows.CommissionMachine, commissionInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res workflows.CommissionMachineResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	equal(t, "activities", r.journal(), []string{"VerifyPowerGrant", "SetCommissionStatus Commissioning", "PowerMachine status",
		"PowerMachine on", "PowerMachine off", "SetCommissionStatus Ready"})
	if res.Status != api.StatusReady || res.Scripts != 2 || r.status != api.StatusReady || r.power != api.PowerStateOff {
		t.Errorf("result %+v, machine status %q power %s", res, r.status, r.power)
	}
}

// A machine that is on already is power-cycled, since powering it on would not boot it again.
func TestCommissionMachineCyclesARunningMachine(t *testing.T) {
	r := newCommissionRack(0)
	r.power = api.PowerStateOn
	env := commissionEnv(r)
	env.ExecuteWorkflow(workflows.CommissionMachine, commissionInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	equal(t, "activities", r.journal(), []string{"VerifyPowerGrant", "SetCommissionStatus Commissioning", "PowerMachine status",
		"PowerMachine cycle", "PowerMachine off", "SetCommissionStatus Ready"})
}

// A machine that never network-boots makes the workflow give up after its Timeout: the
// machine is powered off and Failed commissioning says at which step and why.
func TestCommissionMachineGivesUpWhenItNeverBoots(t *testing.T) {
	r := newCommissionRack(-1)
	env := commissionEnv(r)
	in := commissionInput()
	in.Timeout = 7 * time.Minute
	var elapsed time.Duration
	start := env.Now()
	env.ExecuteWorkflow(workflows.CommissionMachine, in)
	elapsed = env.Now().Sub(start)
	err := env.GetWorkflowError()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeCommissionTimeout {
		t.Fatalf("workflow error %v, want %s", err, workflows.ErrTypeCommissionTimeout)
	}
	if elapsed < in.Timeout || elapsed > in.Timeout+time.Minute {
		t.Errorf("gave up after %s, want the Timeout %s", elapsed, in.Timeout)
	}
	equal(t, "activities", r.journal(), []string{"VerifyPowerGrant", "SetCommissionStatus Commissioning", "PowerMachine status",
		"PowerMachine on", "PowerMachine off", "SetCommissionStatus Failed commissioning"})
	if r.status != api.StatusFailedCommissioning || r.power != api.PowerStateOff ||
		!strings.HasPrefix(r.reason, "wait for enlistment and commissioning: the machine did not enlist within 7m0s") {
		t.Errorf("machine status %q (%q), power %s", r.status, r.reason, r.power)
	}
}

// A cancelled commissioning powers the machine off and records why on a disconnected context.
func TestCommissionMachineCancelledPowersOff(t *testing.T) {
	r := newCommissionRack(-1)
	env := commissionEnv(r)
	env.RegisterDelayedCallback(env.CancelWorkflow, 3*time.Minute)
	env.ExecuteWorkflow(workflows.CommissionMachine, commissionInput())
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Fatalf("workflow error %v, want cancelled", err)
	}
	equal(t, "activities", r.journal(), []string{"VerifyPowerGrant", "SetCommissionStatus Commissioning", "PowerMachine status",
		"PowerMachine on", "PowerMachine off", "SetCommissionStatus Failed commissioning"})
	if r.status != api.StatusFailedCommissioning || r.reason != "wait for enlistment and commissioning: cancelled" || r.power != api.PowerStateOff {
		t.Errorf("machine status %q (%q), power %s", r.status, r.reason, r.power)
	}
}

// A timeout above the bound is refused before anything runs.
func TestCommissionMachineRefusesAnUnboundedTimeout(t *testing.T) {
	r := newCommissionRack(0)
	env := commissionEnv(r)
	in := commissionInput()
	in.Timeout = workflows.MaxCommissionTimeout + time.Second
	env.ExecuteWorkflow(workflows.CommissionMachine, in)
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != rackacts.ErrTypeInvalidInput {
		t.Fatalf("workflow error %v, want %s", err, rackacts.ErrTypeInvalidInput)
	}
	if calls := r.journal(); len(calls) != 0 {
		t.Errorf("activities ran for a refused input: %v", calls)
	}
}

// The longest wait reads the machine's state a bounded number of times, so its history stays
// small: the polls space out as the wait goes on.
func TestCommissionMachineLongestWaitIsBounded(t *testing.T) {
	r := newCommissionRack(-1)
	env := commissionEnv(r)
	in := commissionInput()
	in.Timeout = workflows.MaxCommissionTimeout
	env.ExecuteWorkflow(workflows.CommissionMachine, in)
	if err := env.GetWorkflowError(); err == nil {
		t.Fatal("a machine that never boots was commissioned")
	}
	if r.reads > 150 {
		t.Errorf("the longest wait read the machine %d times, want at most 150", r.reads)
	}
}

// A rack that restarts while the machine boots (its reads failing for a while) delays the
// commissioning, which then completes.
func TestCommissionMachineRidesOutARackRestart(t *testing.T) {
	r := newCommissionRack(2)
	r.away = 5
	env := commissionEnv(r)
	env.ExecuteWorkflow(workflows.CommissionMachine, commissionInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if r.status != api.StatusReady || r.power != api.PowerStateOff {
		t.Errorf("machine %q (%q), power %s", r.status, r.reason, r.power)
	}
}
