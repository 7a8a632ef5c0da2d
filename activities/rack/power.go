package rack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities/heartbeat"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/rack/power"
	"github.com/ironflow/ironflow/region/api"
)

// The power activities (ARCHITECTURE.md "Power"): the rack drives its machines' BMCs on its own
// networks. Inputs name the machine; the rack fetches the BMC credential from its region just
// before it uses it (no payload carries it) and reports every result to the region, which
// stores the state on the machine and audits an action with who asked.

// Application error types of the power activities; recorded in histories, never to change.
const (
	ErrTypePowerRefused   = "PowerRefused"   // the BMC refused (credentials, the request) or the type has no driver
	ErrTypeBMCUnreachable = "BMCUnreachable" // the BMC did not answer within the driver's tries
	ErrTypeMachineHeld    = "MachineHeld"    // a migration holds the machine
)

// PowerRegion is what the power activities need of the rack's region (implemented by package
// rack, with the rack's token through its link).
type PowerRegion interface {
	Machine(ctx context.Context, key string) (api.Machine, error)
	// RackMachines lists the machines of this rack.
	RackMachines(ctx context.Context) ([]api.Machine, error)
	PowerCredential(ctx context.Context, machine string) (api.PowerCredential, error)
	ReportPower(ctx context.Context, machine string, rep api.PowerReport) (api.Machine, error)
	ReportCommissioning(ctx context.Context, machine string, rep api.CommissionReport) (api.Machine, error)
	VerifyGrant(ctx context.Context, check api.GrantCheck) (api.GrantClaims, error)
}

// Power is how the rack reaches its machines' power: its region and the drivers by power type
// (a pod VM's virsh driver is opened from the pods' dialer instead).
type Power struct {
	Region  PowerRegion
	Drivers power.Drivers
}

// WithPower gives a the power drivers of the rack (a function: every exported method of
// Activities is registered as an activity).
func WithPower(a *Activities, p Power) *Activities {
	a.power = p
	return a
}

// PowerGrantInput names a machine and carries the caller's power grant for it.
type PowerGrantInput struct {
	Machine string `json:"Machine"` // machine UUID
	Grant   string `json:"Grant"`
}

// VerifyPowerGrant has the rack's region check that the grant covers power on the machine and
// that no migration holds it, and audit the check with the workflow that asks. A refusal is
// final.
func (a *Activities) VerifyPowerGrant(ctx context.Context, in PowerGrantInput) (PodGrantResult, error) {
	if a.power.Region == nil {
		return PodGrantResult{}, temporal.NewNonRetryableApplicationError("this rack's worker drives no power", ErrTypeWrongRack, nil)
	}
	claims, err := a.power.Region.VerifyGrant(ctx, api.GrantCheck{Grant: in.Grant, Kind: api.GrantPower, Key: in.Machine, Migration: workflowID(ctx)})
	if statusIn(err, http.StatusConflict) {
		return PodGrantResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeMachineHeld, nil)
	}
	if statusIn(err, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity) {
		return PodGrantResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the region refused the power grant for machine %s: %v (ask it for one as an operator or admin)", in.Machine, err), ErrTypeGrantRefused, nil)
	}
	if err != nil {
		return PodGrantResult{}, fmt.Errorf("verify the power grant for machine %s: %w", in.Machine, err)
	}
	return PodGrantResult{GrantedTo: claims.GrantedTo}, nil
}

// PowerMachineInput is a power action (on, off, cycle or status) on a machine of the rack.
type PowerMachineInput struct {
	Machine     string          `json:"Machine"` // UUID
	Action      api.PowerAction `json:"Action"`
	RequestedBy string          `json:"RequestedBy"` // the user the verified grant names, for the audit
}

// PowerMachineResult is the machine's power state after the action.
type PowerMachineResult struct {
	State api.PowerStatus `json:"State"`
	// NeedsOperator: the machine's driver is manual; an operator must act (Message says what).
	NeedsOperator bool   `json:"NeedsOperator,omitempty"`
	Message       string `json:"Message,omitempty"`
	BootNote      string `json:"BootNote,omitempty"`
}

// PowerMachine runs the action with the machine's driver and reports the result to the region
// (stored on the machine, audited). It is idempotent: on for a machine that is on changes
// nothing. A BMC that refuses or does not answer fails it for good (the driver tried already);
// the region's refusal of a machine of another rack too.
func (a *Activities) PowerMachine(ctx context.Context, in PowerMachineInput) (PowerMachineResult, error) {
	if _, err := api.ParsePowerRequest(string(in.Action)); err != nil {
		return PowerMachineResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidInput, nil)
	}
	if a.power.Region == nil {
		return PowerMachineResult{}, temporal.NewNonRetryableApplicationError("this rack's worker drives no power", ErrTypeWrongRack, nil)
	}
	var res PowerMachineResult
	err := heartbeat.While(ctx, func(ctx context.Context) error {
		var err error
		res, err = a.powerMachine(ctx, in, workflowID(ctx))
		return err
	})
	return res, err
}

// powerMachine opens the machine's driver, applies the action and reports what it found,
// failure included.
func (a *Activities) powerMachine(ctx context.Context, in PowerMachineInput, workflow string) (PowerMachineResult, error) {
	d, err := a.openDriver(ctx, in.Machine)
	var out power.Outcome
	if err == nil {
		out, err = power.Apply(ctx, d, in.Action)
		d.Close()
	}
	res := PowerMachineResult{State: out.State, BootNote: out.BootNote}
	rep := api.PowerReport{State: out.State, Action: in.Action, RequestedBy: in.RequestedBy, Workflow: workflow}
	if workflow == "" {
		rep.Action = "" // the rack's poll: shown on the machine, not audited
	}
	switch {
	case errors.Is(err, power.ErrNeedsOperator):
		res = PowerMachineResult{State: api.PowerStateUnknown, NeedsOperator: true, Message: err.Error()}
		rep.State, err = api.PowerStateUnknown, nil
	case err != nil:
		rep.State, rep.Error = api.PowerStateError, err.Error()
	}
	if res.State == "" {
		res.State = rep.State
	}
	if _, rerr := a.power.Region.ReportPower(ctx, in.Machine, rep); rerr != nil && !isRefusal(err) {
		return res, regionError(rerr, "machine %s: report its power", in.Machine)
	}
	return res, powerError(err)
}

// isRefusal reports whether err is already a final error of the activity.
func isRefusal(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}

// openDriver opens the driver of the machine: a pod VM's virsh (its pod must be this rack's,
// the VM among its VMs), else the type its power credential names, fetched from the region now.
func (a *Activities) openDriver(ctx context.Context, machine string) (power.Driver, error) {
	m, err := a.power.Region.Machine(ctx, machine)
	if err != nil {
		return nil, regionError(err, "machine %s", machine)
	}
	if m.Pod != "" {
		pod, err := a.podVM(ctx, m.Pod, m.Uuid)
		if err != nil {
			return nil, err
		}
		conn, err := a.pods.Dialer.Dial(pod)
		if err != nil {
			return nil, podError(pod, noDaemonHint(pod, err))
		}
		return power.Virsh{Conn: conn, VM: m.Uuid}, nil
	}
	cred, err := a.power.Region.PowerCredential(ctx, m.Uuid)
	if err != nil {
		return nil, regionError(err, "machine %s: its power credential", m.Name)
	}
	return a.power.Drivers.Open(ctx, cred)
}

// powerError makes what retrying cannot fix final.
func powerError(err error) error {
	switch {
	case err == nil || isRefusal(err):
		return err
	case errors.Is(err, power.ErrRefused), errors.Is(err, power.ErrUnknownType), errors.Is(err, pods.ErrRefused), errors.Is(err, pods.ErrNoVM):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePowerRefused, nil)
	case errors.Is(err, power.ErrUnreachable):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBMCUnreachable, nil)
	}
	return err
}

// MaxPowerPolls is how many machines' power the rack checks at once.
const MaxPowerPolls = 8

// PollPower checks the power state of every machine of the rack that has a power driver, at
// most MaxPowerPolls at once, and reports each to the region (the rack's schedule, outside
// Temporal). It returns the errors of the machines it could not check, each naming its machine.
func PollPower(ctx context.Context, a *Activities) error {
	if a.power.Region == nil {
		return nil
	}
	ms, err := a.power.Region.RackMachines(ctx)
	if err != nil {
		return fmt.Errorf("list the rack's machines: %w", err)
	}
	slots := make(chan struct{}, MaxPowerPolls)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, m := range ms {
		if m.Power == nil || m.Power.Type == "" {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if _, err := a.powerMachine(ctx, PowerMachineInput{Machine: m.Uuid, Action: api.PowerStatusAction}, ""); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("machine %s: %w", m.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
