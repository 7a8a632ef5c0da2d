package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
)

// MachinePowerInput is a power action (on, off, cycle or status) on a machine, run by the
// worker of the machine's rack (its pod's rack for a pod VM). It names the machine and carries
// the caller's power grant; the BMC credential stays on the region until the rack fetches it.
type MachinePowerInput struct {
	Machine string          `json:"Machine"` // UUID
	Rack    string          `json:"Rack"`    // the rack whose worker reaches the machine's BMC
	Grant   string          `json:"Grant"`
	Action  api.PowerAction `json:"Action"`
}

// MachinePowerID is the one workflow ID of a machine's power actions: one at a time.
func MachinePowerID(machine string) string { return "machine-power/" + machine }

// powerCallOptions bound a power step: the rack's worker must pick it up within a minute (a rack
// without a worker fails the action rather than leaving the caller waiting), a BMC exchange is
// bounded by the driver (ipmi.TryTimeout × tries); the step heartbeats and is waited for when
// cancelled. A retry repeats only what the region's answer lost (actions are idempotent).
var powerCallOptions = workflow.ActivityOptions{
	ScheduleToStartTimeout: time.Minute,
	StartToCloseTimeout:    2 * time.Minute,
	HeartbeatTimeout:       30 * time.Second,
	WaitForCancellation:    true,
	RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 3},
}

// MachinePower has the rack's region verify the grant (no migration may hold the machine),
// records who asked in the StartedBy memo, and runs the action on the rack, which reports the
// result to the region (stored on the machine, audited there).
func MachinePower(ctx workflow.Context, in MachinePowerInput) (rackacts.PowerMachineResult, error) {
	if _, err := api.ParsePowerRequest(string(in.Action)); err != nil {
		return rackacts.PowerMachineResult{}, temporal.NewNonRetryableApplicationError(err.Error(), rackacts.ErrTypeInvalidInput, nil)
	}
	if in.Machine == "" || in.Rack == "" {
		return rackacts.PowerMachineResult{}, temporal.NewNonRetryableApplicationError("a power workflow needs the Machine and its Rack", rackacts.ErrTypeInvalidInput, nil)
	}
	if err := checkOwnID(ctx, "the power action on machine "+in.Machine, MachinePowerID(in.Machine)); err != nil {
		return rackacts.PowerMachineResult{}, err
	}
	rackCtx := workflow.WithTaskQueue(ctx, rackacts.TaskQueue(in.Rack))
	var who rackacts.PodGrantResult
	if err := call(rackCtx, powerCallOptions, rackActs.VerifyPowerGrant, rackacts.PowerGrantInput{Machine: in.Machine, Grant: in.Grant}, &who); err != nil {
		return rackacts.PowerMachineResult{}, err
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{MemoStartedBy: who.GrantedTo}); err != nil {
		return rackacts.PowerMachineResult{}, err
	}
	var res rackacts.PowerMachineResult
	err := call(rackCtx, powerCallOptions, rackActs.PowerMachine,
		rackacts.PowerMachineInput{Machine: in.Machine, Action: in.Action, RequestedBy: who.GrantedTo}, &res)
	return res, err
}
