// Package uitemporal gives the region's web UI its rack transfers, through Temporal and
// workflows/moves like the CLI's `racks transfer`, `migrations pause` and `resume`. It is
// wired in by the process (cmd/ironflow, the tests), so the region server itself never
// reaches the workflows.
package uitemporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/region/ui"
	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// waitForRunningJob is how long each machine's migration waits for a job running on it, the
// CLI's default (racks transfer --wait-for-running-job).
const waitForRunningJob = 10 * time.Minute

// Transfers are rack transfers on the Temporal namespace of tc, whose data converter seals
// the grants the inputs carry.
type Transfers struct{ tc client.Client }

// New returns the UI's transfers over tc.
func New(tc client.Client) *Transfers { return &Transfers{tc: tc} }

var _ ui.Transfers = (*Transfers)(nil)

func (t *Transfers) Start(ctx context.Context, source, target, rack, grant string) error {
	in := workflows.TransferRackInput{SourceRegion: source, TargetRegion: target, Rack: rack,
		Window: workflows.DefaultBulkWindow, WaitForRunningJob: waitForRunningJob, Grant: grant}
	_, err := moves.StartTransfer(ctx, t.tc, in)
	var running *moves.AlreadyRunningError
	if errors.As(err, &running) {
		return fmt.Errorf("the rack is already being transferred by %s", running.ID)
	}
	return err
}

func (t *Transfers) Status(ctx context.Context, rack string) (ui.TransferStatus, error) {
	id := workflows.TransferRackID(rack)
	run, err := moves.Describe(ctx, t.tc, id)
	if moves.IsNotFound(err) {
		return ui.TransferStatus{}, ui.ErrNoTransfer
	}
	if err != nil {
		return ui.TransferStatus{}, fmt.Errorf("transfer %s: %w", id, err)
	}
	st := ui.TransferStatus{ID: id, Target: run.TargetRegion, Running: run.Running(), Phase: run.Status}
	v, err := t.tc.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	if err != nil {
		// A closed run without a worker to answer still has its status.
		return st, nil
	}
	var p workflows.TransferProgress
	if err := v.Get(&p); err != nil {
		return st, fmt.Errorf("progress of %s: %w", id, err)
	}
	st.Phase, st.Paused, st.Errors = p.Phase, p.Paused, p.Errors
	st.Total, st.Done, st.Failed, st.Migrating = p.MachinesTotal, p.MachinesDone, p.MachinesFailed, p.MachinesRunning
	return st, nil
}

func (t *Transfers) Pause(ctx context.Context, rack, by string) error {
	_, err := moves.Pause(ctx, t.tc, workflows.TransferRackID(rack), by)
	return err
}

func (t *Transfers) Resume(ctx context.Context, rack, by string) error {
	_, err := moves.Resume(ctx, t.tc, workflows.TransferRackID(rack), by)
	return err
}
