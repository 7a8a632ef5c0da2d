package workflows

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
)

// Recovery of a terminated transfer (region/api/transfer_recovery.go). Terminating a
// TransferRack runs none of its undos: the rack stays paused on the source, and the copy it
// imported stays registered on the target. Both regions record the run that holds the rack,
// and every run under the rack's workflow ID (transfer-rack/<uuid>) first looks for holds of
// other runs of that ID, which have closed since Temporal runs one at a time per ID: the
// next TransferRack of the rack, in either direction, and RecoverRackTransfer, which
// `ironflow racks recover` starts under the same ID (so it is refused while a transfer of
// the rack runs, and no transfer starts while it runs). A leftover is undone when the rack
// still serves from the source, and finished (hand-over, release) when it serves from the
// target; when the run got as far as the repoint, the rack itself says which, and a rack
// that cannot say leaves everything as it is.

// PhaseRecovering is the phase of a run that recovers a closed run's leftover.
const PhaseRecovering = "recovering-leftover"

// rackRecoveryChange is the GetVersion change ID of TransferRack's look for leftovers.
const rackRecoveryChange = "rack-recovery"

// RecoverRackInput names the rack and a region to look at (the one the operator gave); the
// holds found there name the other region of their transfer.
type RecoverRackInput struct {
	Rack      string // UUID
	Regions   []string
	StartedBy string `json:",omitempty"` // who asked, for the regions' audit events
}

// RecoverRackResult lists what was recovered; empty when nothing was left.
type RecoverRackResult struct {
	Recovered []RecoveredTransfer
}

// RecoveredTransfer is one closed transfer run whose leftover was undone or finished.
type RecoveredTransfer struct {
	Transfer, Run string
	From, To      string
	Outcome       string   // "undone" or "finished" (api.RecoveryUndone, api.RecoveryFinished)
	Actions       []string // "region: action" the regions took
}

// RecoverRackTransfer undoes or finishes what closed TransferRack runs of in.Rack left, and
// reports it. It runs as TransferRackID(in.Rack) only (FindRackLeftovers refuses any other
// ID), so it never runs beside a transfer of the rack.
func RecoverRackTransfer(ctx workflow.Context, in RecoverRackInput) (RecoverRackResult, error) {
	if id, err := uuid.Parse(in.Rack); err != nil || id.String() != in.Rack || len(in.Regions) == 0 {
		return RecoverRackResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("invalid recovery input: Rack %q must be a lower-case UUID and Regions %v name at least one region", in.Rack, in.Regions), ErrTypeInvalidInput, nil)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, RackUuidKey.ValueSet(in.Rack)); err != nil {
		return RecoverRackResult{}, fmt.Errorf("upsert search attributes: %w", err)
	}
	recovered, err := recoverLeftovers(ctx, activities.RackLeftoverQuery{Rack: in.Rack, Regions: in.Regions}, in.StartedBy)
	final := PhaseCompleted
	if err != nil {
		final = PhaseFailed
	}
	return RecoverRackResult{Recovered: recovered}, errors.Join(err, upsertPhase(ctx, final))
}

// recoverLeftover is the first thing a TransferRack run does: undo or finish what earlier
// runs of the rack left, once the transfer's grant is verified.
func (t *rackTransfer) recoverLeftover(ctx workflow.Context) error {
	if workflow.GetVersion(ctx, rackRecoveryChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	in := t.input()
	recovered, err := recoverLeftovers(ctx, activities.RackLeftoverQuery{Rack: t.in.Rack, Regions: []string{t.in.SourceRegion, t.in.TargetRegion}, Transfer: &in}, "")
	for _, r := range recovered {
		t.progress.Errors = append(t.progress.Errors, fmt.Sprintf("recovered what transfer run %s (%s→%s) left: %s (%v)", r.Run, r.From, r.To, r.Outcome, r.Actions))
	}
	return err
}

// recoverLeftovers finds and recovers the leftovers of closed runs. startedBy is who asked;
// for a transfer, the user its grant was issued to.
func recoverLeftovers(ctx workflow.Context, q activities.RackLeftoverQuery, startedBy string) ([]RecoveredTransfer, error) {
	var found activities.RackLeftovers
	if err := call(ctx, regionCallOptions, acts.FindRackLeftovers, q, &found); err != nil {
		return nil, err
	}
	if len(found.Leftovers) == 0 {
		return nil, nil
	}
	if err := upsertPhase(ctx, PhaseRecovering); err != nil {
		return nil, err
	}
	if startedBy == "" {
		startedBy = found.StartedBy
	}
	var recovered []RecoveredTransfer
	for _, l := range found.Leftovers {
		finish := l.Finished()
		if l.NeedsRackState() {
			var err error
			if finish, err = rackServesFrom(ctx, l); err != nil {
				return recovered, err
			}
		}
		var res activities.RackRecoveryResult
		if err := call(ctx, regionCallOptions, acts.RecoverRackLeftover, activities.RackRecoveryStep{Leftover: l, Finish: finish, StartedBy: startedBy}, &res); err != nil {
			return recovered, err
		}
		r := RecoveredTransfer{Transfer: l.Transfer, Run: l.Run, From: l.From, To: l.To, Outcome: api.RecoveryUndone, Actions: slices.Clone(res.Actions)}
		if finish {
			r.Outcome = api.RecoveryFinished
		}
		recovered = append(recovered, r)
	}
	return recovered, nil
}

// rackServesFrom asks the rack where it serves from: true for the leftover's target. A rack
// that cannot say (its worker does not answer) leaves the leftover as it is.
func rackServesFrom(ctx workflow.Context, l activities.RackLeftover) (bool, error) {
	var state rackacts.State
	err := call(workflow.WithTaskQueue(ctx, rackacts.TaskQueue(l.Rack)), rackCallOptions, rackActs.ReportState, nil, &state)
	switch {
	case err != nil:
		return false, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("transfer run %s of rack %s (%s→%s) ended during its repoint, and the rack could not say where it serves from (%v): nothing was recovered; start the rack's controller (with its worker) and recover again",
				l.Run, l.Rack, l.From, l.To, err), ErrRackStateUnknown, err)
	case state.Region != l.To && state.Region != l.From:
		return false, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("rack %s serves from region %q, neither %s nor %s of transfer run %s: nothing was recovered", l.Rack, state.Region, l.From, l.To, l.Run), ErrRackStateUnknown, nil)
	}
	return state.Region == l.To, nil
}
