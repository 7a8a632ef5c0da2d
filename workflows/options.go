package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// promiseChange is the GetVersion change ID of the runs that keep the invariants at every
// point (ARCHITECTURE.md "Moves and their invariants"): the ticket minted inside the copy,
// steps that change state waited for when cancelled, undos that retry until they succeed
// and never destroy the last copy, the agent brought back after a rollback, and the steps
// after the commit point finished whatever happens. Runs recorded before replay their old
// command sequence.
const promiseChange = "keep-promise"

// keepsPromise reports whether this run takes the promiseChange paths.
func keepsPromise(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, promiseChange, workflow.DefaultVersion, 1) >= 1
}

// Activity options. Forward steps give up after a bounded number of retries (and then
// compensate); compensations and the steps after the commit point must not be abandoned.
var (
	regionCallOptions = workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	}
	copyOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		RetryPolicy:         regionCallOptions.RetryPolicy,
	}
	// Runs recorded before promiseChange gave compensations and the steps after the commit
	// point an hour.
	mustFinishOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: time.Hour,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	}
	// finishOptions retry until the step succeeds: the steps after a commit point.
	finishOptions = workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         mustFinishOptions.RetryPolicy,
	}
	// undoOptions give one try of an undo a few attempts; Compensations.Run retries the undo
	// itself, with a backoff, until it succeeds or an operator steps in.
	undoOptions = workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
	}
	// A cancelled activation is waited for, so the check of the target that follows sees
	// whether it took effect.
	activateOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    mustFinishOptions.StartToCloseTimeout,
		ScheduleToCloseTimeout: mustFinishOptions.ScheduleToCloseTimeout,
		WaitForCancellation:    true,
		RetryPolicy:            mustFinishOptions.RetryPolicy,
	}
	// ESXi steps may wait for the machine's agent to take ad-hoc jobs. They heartbeat, and the
	// workflow waits for a cancelled step to stop before Cleanup touches the host.
	esxiStepOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		WaitForCancellation: true,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
	}
	esxiCleanupOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    15 * time.Minute,
		ScheduleToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:       time.Minute,
		WaitForCancellation:    true,
		RetryPolicy:            mustFinishOptions.RetryPolicy,
	}
)

// waitedForOnCancel is o for a step that changes state and may outlast a request: it
// heartbeats (package activities/heartbeat), so a cancel reaches it, and the workflow waits
// for it to stop before it undoes anything. A cancel reaches the activity with the answer
// to a heartbeat, which the SDK sends at most every 0.8 HeartbeatTimeout: the timeout is
// short so a cancel takes seconds.
func waitedForOnCancel(o workflow.ActivityOptions) workflow.ActivityOptions {
	o.HeartbeatTimeout = 10 * time.Second
	o.WaitForCancellation = true
	return o
}

// GetVersion change IDs of the cancel paths of runs that keep the invariants, each added
// after promiseChange, so runs recorded before each replay without it:
//   - holdAwaitedChange: a cancel waits for the request that first holds the machine or rack
//     (Quiesce, PauseRack): a hold that lands after its undo ran would stay forever;
//   - finalizeAwaitedChange: a cancel waits for FinalizeMigration: a finalize that lands after
//     the undos began leaves a stub on the source with the target's copy undone;
//   - cancelBetweenStepsChange: a cancel that arrives while a step ran (and was waited for)
//     starts no further step.
const (
	holdAwaitedChange        = "hold-awaited-on-cancel"
	finalizeAwaitedChange    = "finalize-awaited-on-cancel"
	cancelBetweenStepsChange = "cancel-between-steps"
)

// awaitedOnCancel is o for one request that changes state (no heartbeat: the cancel waits for
// its answer) in a run that keeps the invariants and takes change; o unchanged otherwise.
func awaitedOnCancel(ctx workflow.Context, promise bool, change string, o workflow.ActivityOptions) workflow.ActivityOptions {
	if promise && workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) >= 1 {
		o.WaitForCancellation = true
	}
	return o
}

// cancelledBetweenSteps reports a run cancelled while its last step ran, which takes
// cancelBetweenStepsChange: the next step never starts. GetVersion is asked only once
// cancelled, so runs never cancelled carry no marker.
func cancelledBetweenSteps(ctx workflow.Context, promise bool) bool {
	return promise && ctx.Err() != nil && workflow.GetVersion(ctx, cancelBetweenStepsChange, workflow.DefaultVersion, 1) >= 1
}

// stepOptions are the options of one run: those it was recorded with, or the promiseChange ones.
type stepOptions struct {
	copy, undo, finish, rackSwap, esxiUndo workflow.ActivityOptions
}

func optionsFor(promise bool) stepOptions {
	if !promise {
		return stepOptions{copy: copyOptions, undo: mustFinishOptions, finish: mustFinishOptions, rackSwap: rackCallOptions, esxiUndo: esxiCleanupOptions}
	}
	esxiUndo := esxiCleanupOptions
	esxiUndo.ScheduleToCloseTimeout = 0
	esxiUndo.RetryPolicy = undoOptions.RetryPolicy
	return stepOptions{
		copy:     waitedForOnCancel(copyOptions),
		undo:     undoOptions,
		finish:   finishOptions,
		rackSwap: waitedForOnCancel(rackCallOptions),
		esxiUndo: esxiUndo,
	}
}

// call is how every workflow runs an activity: it runs activity with opts and decodes its
// result into out (nil: no result; a nil in sends no argument).
func call(ctx workflow.Context, opts workflow.ActivityOptions, activity, in, out any) error {
	var args []any
	if in != nil {
		args = append(args, in)
	}
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activity, args...)
	if out == nil {
		return f.Get(ctx, nil)
	}
	return f.Get(ctx, out)
}
