package rack

import (
	"context"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/region/api"
)

// The commissioning activities (ARCHITECTURE.md "Commissioning"): the CommissionMachine
// workflow reads and records a machine's commissioning on the machine's rack, with the rack's
// token, which reaches its own machines only.

// CommissionMachineInput names a machine of the rack.
type CommissionMachineInput struct {
	Machine string `json:"Machine"` // UUID
}

// CommissionState is what the region holds of a machine's commissioning: small, as the wait
// reads it again and again.
type CommissionState struct {
	Status string `json:"Status"`
	// Enlisted: the machine reported an inventory since the commissioning started (the start
	// cleared the one before).
	Enlisted bool `json:"Enlisted"`
	// EnlistedAt is the time of the machine's latest enlistment report, zero before any.
	EnlistedAt time.Time `json:"EnlistedAt,omitzero"`
	Scripts    int       `json:"Scripts"` // commissioning results uploaded with the inventory
}

// MachineCommissioning reads the machine's commissioning state from the region. It changes
// nothing.
func (a *Activities) MachineCommissioning(ctx context.Context, in CommissionMachineInput) (CommissionState, error) {
	if a.power.Region == nil {
		return CommissionState{}, temporal.NewNonRetryableApplicationError("this rack's worker drives no power", ErrTypeWrongRack, nil)
	}
	m, err := a.power.Region.Machine(ctx, in.Machine)
	if err != nil {
		return CommissionState{}, regionError(err, "machine %s", in.Machine)
	}
	st := CommissionState{Status: m.Status}
	if e := m.Enlisted; e != nil {
		st.Enlisted, st.EnlistedAt, st.Scripts = e.Inventory != nil, e.Time, len(e.Commissioning)
	}
	return st, nil
}

// SetCommissionStatusInput is a commissioning step's outcome on a machine of the rack.
type SetCommissionStatusInput struct {
	Machine string `json:"Machine"` // UUID
	Status  string `json:"Status"`
	Reason  string `json:"Reason,omitempty"`
}

// SetCommissionStatus records the outcome on the machine (audited by the region with the
// workflow). Setting the same status again changes nothing but its audit, so a retry is safe;
// the region's refusal (another rack's machine, Ready without an inventory, a migration
// holding it) is final.
func (a *Activities) SetCommissionStatus(ctx context.Context, in SetCommissionStatusInput) error {
	if a.power.Region == nil {
		return temporal.NewNonRetryableApplicationError("this rack's worker drives no power", ErrTypeWrongRack, nil)
	}
	rep := api.CommissionReport{Status: in.Status, Reason: in.Reason, Workflow: workflowID(ctx)}
	if _, err := a.power.Region.ReportCommissioning(ctx, in.Machine, rep); err != nil {
		return regionError(err, "machine %s: set its status to %s", in.Machine, in.Status)
	}
	return nil
}
