package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
)

// drainChange is the GetVersion change ID of the drain step of TransferRack: once
// the rack is paused, one activity waits for the jobs running on its machines, instead of
// each machine's migration waiting on its own. Runs recorded before it have no such step.
const drainChange = "transfer-drain-jobs"

// drainOptions: the drain heartbeats each poll, and a cancel, which reaches it with the answer
// to a heartbeat (waitedForOnCancel), waits for it to stop. Its StartToCloseTimeout is the
// transfer's WaitForRunningJob plus drainMargin; its own deadline ends it first, with an error
// naming the jobs.
var drainOptions = waitedForOnCancel(workflow.ActivityOptions{RetryPolicy: regionCallOptions.RetryPolicy})

const drainMargin = time.Minute

// drain waits, up to WaitForRunningJob, for the jobs running on the rack's machines to end.
func (t *rackTransfer) drain(ctx workflow.Context) error {
	t.jobsDeadline = workflow.Now(ctx).Add(t.in.WaitForRunningJob)
	opts := drainOptions
	opts.StartToCloseTimeout = t.in.WaitForRunningJob + drainMargin
	in := activities.DrainInput{Region: t.in.SourceRegion, Rack: t.in.Rack, Deadline: t.jobsDeadline}
	return call(ctx, opts, acts.DrainRackJobs, in, nil)
}

// jobWait is how long a machine's migration may wait for a job running on it: what is left
// of the drain's deadline, or WaitForRunningJob in runs without the drain.
func (t *rackTransfer) jobWait(ctx workflow.Context) time.Duration {
	if t.jobsDeadline.IsZero() {
		return t.in.WaitForRunningJob
	}
	return max(0, t.jobsDeadline.Sub(workflow.Now(ctx)))
}
