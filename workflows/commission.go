package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
)

// CommissionMachineInput asks for a machine of Rack, known by its BMC, to be commissioned: the
// rack powers it on to network-boot the discovery image, whose agent enlists it onto this
// record (matched by the BMC address it reads in-band) and uploads its inventory. It carries
// the caller's power grant; the BMC credential stays on the region until the rack fetches it.
type CommissionMachineInput struct {
	Machine string `json:"Machine"` // UUID
	Rack    string `json:"Rack"`    // the rack whose worker reaches the machine's BMC
	Grant   string `json:"Grant"`
	// Timeout bounds the wait for the machine to enlist and upload its commissioning results
	// (0: DefaultCommissionTimeout; at most MaxCommissionTimeout).
	Timeout time.Duration `json:"Timeout,omitempty"`
}

// CommissionMachineResult is a commissioned machine's state.
type CommissionMachineResult struct {
	Status   string `json:"Status"`
	Scripts  int    `json:"Scripts"`            // commissioning results it uploaded
	BootNote string `json:"BootNote,omitempty"` // what the BMC said of the boot device, if it refused PXE
}

// The wait for the machine to enlist is bounded: at most MaxCommissionTimeout, polled every
// commissionPollInterval at first and then at a tenth of the time waited so far, at most
// commissionPollMaxInterval apart (148 polls in the longest wait), so the history stays
// small.
const (
	DefaultCommissionTimeout  = 20 * time.Minute
	MaxCommissionTimeout      = 2 * time.Hour
	commissionPollInterval    = 5 * time.Second
	commissionPollMaxInterval = time.Minute
)

// CommissionMachineID is the one workflow ID of a machine's commissioning: one at a time.
func CommissionMachineID(machine string) string { return "commission-machine/" + machine }

// The steps of a commissioning, as a failure's reason names them.
const (
	commissionStepStart    = "start commissioning"
	commissionStepBMC      = "check the BMC"
	commissionStepPowerOn  = "power on to network-boot"
	commissionStepEnlist   = "wait for enlistment and commissioning"
	commissionStepPowerOff = "power off"
	commissionStepReady    = "record Ready"
)

// commissionRegionOptions bound a read or write of the machine through the rack's region: an
// attempt is short, and it is retried for up to 10 minutes, so a rack that restarts while the
// machine boots (its worker away) delays the commissioning rather than failing it.
var commissionRegionOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 10 * time.Minute,
	RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
}

// commissionUndoOptions: the failure's record keeps being retried for an hour, as a rack that
// restarts comes back.
var commissionUndoOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: time.Hour,
	RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
}

// CommissionMachine commissions a machine known by its BMC (ARCHITECTURE.md "Commissioning"):
// the rack's region verifies the grant; the machine's status becomes Commissioning (its old
// inventory dropped); the rack checks that the BMC answers and powers the machine on
// (cycles it when it is on) to network-boot; the workflow waits until the machine has
// enlisted onto its record and uploaded its inventory, powers it off and records it Ready.
// When a step fails, the wait times out or the run is cancelled, a disconnected context powers
// the machine off (once a power-on was asked for) and records Failed commissioning with the
// step and why.
func CommissionMachine(ctx workflow.Context, in CommissionMachineInput) (CommissionMachineResult, error) {
	timeout, err := in.check()
	if err != nil {
		return CommissionMachineResult{}, temporal.NewNonRetryableApplicationError(err.Error(), rackacts.ErrTypeInvalidInput, nil)
	}
	if err := checkOwnID(ctx, "the commissioning of machine "+in.Machine, CommissionMachineID(in.Machine)); err != nil {
		return CommissionMachineResult{}, err
	}
	rackCtx := workflow.WithTaskQueue(ctx, rackacts.TaskQueue(in.Rack))
	var who rackacts.PodGrantResult
	if err := call(rackCtx, powerCallOptions, rackActs.VerifyPowerGrant, rackacts.PowerGrantInput{Machine: in.Machine, Grant: in.Grant}, &who); err != nil {
		return CommissionMachineResult{}, err
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{MemoStartedBy: who.GrantedTo}); err != nil {
		return CommissionMachineResult{}, err
	}
	c := commissioning{in: in, rackCtx: rackCtx, by: who.GrantedTo}
	res, err := c.run(timeout)
	if err != nil {
		return CommissionMachineResult{}, c.fail(err)
	}
	return res, nil
}

// check validates the input and returns the wait's bound.
func (in CommissionMachineInput) check() (time.Duration, error) {
	switch {
	case in.Machine == "" || in.Rack == "":
		return 0, errors.New("a commissioning needs the Machine and its Rack")
	case in.Timeout < 0 || in.Timeout > MaxCommissionTimeout:
		return 0, fmt.Errorf("commissioning Timeout %s is outside [0, %s]", in.Timeout, MaxCommissionTimeout)
	case in.Timeout == 0:
		return DefaultCommissionTimeout, nil
	}
	return in.Timeout, nil
}

// commissioning is one run's state: the step it is at, and whether it asked for power.
type commissioning struct {
	in      CommissionMachineInput
	rackCtx workflow.Context
	by      string
	step    string
	powered bool // a power-on was asked for: the undo powers off
}

func (c *commissioning) run(timeout time.Duration) (CommissionMachineResult, error) {
	c.step = commissionStepStart
	if err := c.setStatus(c.rackCtx, commissionRegionOptions, api.StatusCommissioning, ""); err != nil {
		return CommissionMachineResult{}, err
	}
	c.step = commissionStepBMC
	var state rackacts.PowerMachineResult
	if err := c.power(api.PowerStatusAction, &state); err != nil {
		return CommissionMachineResult{}, err
	}
	if state.NeedsOperator {
		return CommissionMachineResult{}, temporal.NewNonRetryableApplicationError(
			"a machine with a manual power driver is commissioned by booting it by hand: "+state.Message, rackacts.ErrTypePowerRefused, nil)
	}
	c.step = commissionStepPowerOn
	on := api.PowerOn
	if state.State == api.PowerStateOn {
		on = api.PowerCycle // on changes nothing on a running machine: it must boot again
	}
	c.powered = true
	var started rackacts.PowerMachineResult
	if err := c.power(on, &started); err != nil {
		return CommissionMachineResult{}, err
	}
	c.step = commissionStepEnlist
	enlisted, err := c.awaitEnlisted(timeout)
	if err != nil {
		return CommissionMachineResult{}, err
	}
	c.step = commissionStepPowerOff
	if err := c.power(api.PowerOff, nil); err != nil {
		return CommissionMachineResult{}, err
	}
	c.powered = false
	c.step = commissionStepReady
	if err := c.setStatus(c.rackCtx, commissionRegionOptions, api.StatusReady, ""); err != nil {
		return CommissionMachineResult{}, err
	}
	return CommissionMachineResult{Status: api.StatusReady, Scripts: enlisted.Scripts, BootNote: started.BootNote}, nil
}

func (c *commissioning) power(action api.PowerAction, out *rackacts.PowerMachineResult) error {
	var res rackacts.PowerMachineResult
	if out == nil {
		out = &res
	}
	return call(c.rackCtx, powerCallOptions, rackActs.PowerMachine,
		rackacts.PowerMachineInput{Machine: c.in.Machine, Action: action, RequestedBy: c.by}, out)
}

// awaitEnlisted polls the region until the machine has an inventory (cleared when this
// commissioning started) or timeout has passed.
func (c *commissioning) awaitEnlisted(timeout time.Duration) (rackacts.CommissionState, error) {
	ctx := c.rackCtx
	start := workflow.Now(ctx)
	interval := commissionPollInterval
	for {
		var st rackacts.CommissionState
		if err := call(ctx, commissionRegionOptions, rackActs.MachineCommissioning, rackacts.CommissionMachineInput{Machine: c.in.Machine}, &st); err != nil {
			return st, err
		}
		if st.Enlisted {
			return st, nil
		}
		waited := workflow.Now(ctx).Sub(start)
		if waited >= timeout {
			why := "it never network-booted the discovery image, or its enlistment matched no BMC address of this record"
			if !st.EnlistedAt.IsZero() && !st.EnlistedAt.Before(start) {
				why = "it booted and reported through iPXE, but its agent uploaded no inventory"
			}
			return st, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the machine did not enlist within %s: %s", timeout, why), ErrTypeCommissionTimeout, nil)
		}
		interval = min(max(interval, waited/10), commissionPollMaxInterval, timeout-waited)
		if err := workflow.Sleep(ctx, interval); err != nil {
			return st, err
		}
	}
}

// ErrTypeCommissionTimeout: the machine did not enlist within the commissioning's Timeout.
// Recorded in histories, never to change.
const ErrTypeCommissionTimeout = "CommissionTimeout"

// fail undoes a failed or cancelled commissioning on a disconnected context: it powers the
// machine off when a power-on was asked for (the cancelled power activity was waited for
// already) and records Failed commissioning with the step and why. It returns cause, joined
// with what the undo could not do.
func (c *commissioning) fail(cause error) error {
	dctx, cancel := workflow.NewDisconnectedContext(c.rackCtx)
	defer cancel()
	var undo []error
	if c.powered {
		err := call(dctx, powerCallOptions, rackActs.PowerMachine,
			rackacts.PowerMachineInput{Machine: c.in.Machine, Action: api.PowerOff, RequestedBy: c.by}, nil)
		if err != nil {
			undo = append(undo, fmt.Errorf("power the machine off: %w", err))
		}
	}
	reason := truncateReason(c.step + ": " + failureText(cause))
	if err := c.setStatus(dctx, commissionUndoOptions, api.StatusFailedCommissioning, reason); err != nil {
		undo = append(undo, fmt.Errorf("record %s: %w", api.StatusFailedCommissioning, err))
	}
	if len(undo) > 0 {
		return fmt.Errorf("commissioning of machine %s failed at %q and its undo too: %w", c.in.Machine, c.step, errors.Join(append([]error{cause}, undo...)...))
	}
	return cause
}

func (c *commissioning) setStatus(ctx workflow.Context, opts workflow.ActivityOptions, status, reason string) error {
	return call(ctx, opts, rackActs.SetCommissionStatus, rackacts.SetCommissionStatusInput{Machine: c.in.Machine, Status: status, Reason: reason}, nil)
}

// failureText is what an operator reads of err: the innermost application error's message
// (not the activity's envelope), or that the run was cancelled.
func failureText(err error) string {
	if temporal.IsCanceledError(err) {
		return "cancelled"
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// truncateReason keeps a reason within api.MaxStatusReason bytes, cut at a character boundary.
func truncateReason(s string) string {
	if len(s) <= api.MaxStatusReason {
		return s
	}
	cut := api.MaxStatusReason - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
