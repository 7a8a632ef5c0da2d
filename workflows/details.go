package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// What the Temporal UI and CLI say about a running move: the descriptions of its query and
// Updates, and its current details (a move's phase and counts, kept up to date by
// reportDetails). Both answer the workflow's metadata query only and are never recorded in
// its history: they add no command, so runs recorded before them replay unchanged.
const (
	progressDescription   = "The move's progress: its phase, its machines' counts, its errors and the operator's controls."
	pauseDescription      = "Start no new machine, batch or child; those running finish. Refused when already paused."
	resumeDescription     = "Start machines again after a pause. Refused when not paused."
	setWindowDescription  = "Run Window machines at once (1-50) from the next start on. Refused for the window in force."
	compensateDescription = "Retry or abandon the failing undo of a stuck compensation, with a reason."
)

// detailer is a move's progress as its current details say it.
type detailer interface{ details() string }

// reportDetails keeps the run's current details at what progress says: a coroutine that waits,
// without a timer or any other command, for them to change. It goes on while the run
// compensates after a cancel.
func reportDetails[P detailer](ctx workflow.Context, progress func() (P, error)) {
	text := func() string {
		p, _ := progress()
		return p.details()
	}
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			shown := text()
			workflow.SetCurrentDetails(ctx, shown)
			if err := workflow.Await(ctx, func() bool { return text() != shown }); err != nil {
				return
			}
		}
	})
}

func (p Progress) details() string {
	s := fmt.Sprintf("Phase %s, step %d of %d.", p.Phase, p.StepsDone, p.StepsTotal)
	if len(p.Pending) > 0 {
		s += fmt.Sprintf(" Undoing: %d left, next %s.", len(p.Pending), p.Pending[0])
	}
	return s
}

func (p BulkProgress) details() string {
	return fmt.Sprintf("%d of %d machines migrated, %d failed, %d skipped, %d running.%s", p.Done, p.Total, p.Failed, p.Skipped, p.Running, pausedDetail(p.Paused))
}

func (p TransferProgress) details() string {
	return fmt.Sprintf("Phase %s: %d of %d machines moved, %d failed, %d skipped, %d running.%s", p.Phase, p.MachinesDone, p.MachinesTotal, p.MachinesFailed, p.MachinesSkipped, p.MachinesRunning, pausedDetail(p.Paused))
}

func pausedDetail(paused bool) string {
	if paused {
		return " Paused by an operator."
	}
	return ""
}
