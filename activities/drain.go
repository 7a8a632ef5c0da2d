package activities

import (
	"context"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ironflow/ironflow/region/api"
)

// ErrTypeJobsRunning is the failure type of a drain whose deadline passed while jobs still
// ran on the rack's machines.
const ErrTypeJobsRunning = "JobsRunning"

// DefaultDrainPoll is how often DrainRackJobs looks at the source when the input says nothing.
const DefaultDrainPoll = 2 * time.Second

// DrainInput names the rack whose machines' running jobs a transfer waits for, and until when.
type DrainInput struct {
	Region string // the source
	Rack   string // UUID
	// Deadline is when to give up; a zero Deadline looks once. The workflow sets it, so a
	// retried attempt keeps the same one.
	Deadline time.Time
	Poll     time.Duration `json:",omitempty"` // 0: DefaultDrainPoll
}

// DrainResult says what the drain found.
type DrainResult struct {
	Running int // jobs running on the rack's machines at the first look
	Polls   int
}

// JobLister is what DrainRackJobs needs beyond Region: a filtered job list. ClientRegion
// implements it.
type JobLister interface {
	ListJobs(ctx context.Context, filters url.Values) ([]api.Job, error)
}

// ListJobs lists the jobs matching DRP-style exact-match filters.
func (c ClientRegion) ListJobs(ctx context.Context, filters url.Values) ([]api.Job, error) {
	return c.Jobs().List(ctx, filters)
}

// DrainRackJobs waits, polling the source every in.Poll and heartbeating each poll, until no
// job runs on a machine behind the rack, or fails (non-retryable, naming the jobs) once
// in.Deadline has passed. A cancel ends the wait at once. It changes nothing: the rack is
// paused, so no new operation reaches its machines while it waits.
func (a *Activities) DrainRackJobs(ctx context.Context, in DrainInput) (DrainResult, error) {
	poll := in.Poll
	if poll <= 0 {
		poll = DefaultDrainPoll
	}
	var res DrainResult
	for {
		jobs, err := a.runningRackJobs(ctx, in.Region, in.Rack)
		if err != nil {
			return res, err
		}
		if res.Polls++; res.Polls == 1 {
			res.Running = len(jobs)
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, len(jobs))
		}
		if len(jobs) == 0 {
			return res, nil
		}
		wait := time.Until(in.Deadline)
		if wait <= 0 {
			return res, nonRetryable(ErrTypeJobsRunning, "%d jobs still run on the machines of rack %s on %s after waiting until %s: %s; let them finish or stop them, then run the transfer again (or give it a longer WaitForRunningJob)",
				len(jobs), in.Rack, in.Region, in.Deadline.UTC().Format(time.RFC3339), describeJobs(jobs))
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(min(poll, wait)):
		}
	}
}

// runningRackJobs lists the jobs running on the machines behind rack on region.
func (a *Activities) runningRackJobs(ctx context.Context, region, rack string) ([]api.Job, error) {
	r, err := a.Regions.Region(region)
	if err != nil {
		return nil, err
	}
	lister, ok := r.(JobLister)
	if !ok {
		return nil, nonRetryable(ErrTypeNoRackTransfer, "region %s cannot list jobs (%T has no ListJobs)", region, r)
	}
	running, err := lister.ListJobs(ctx, url.Values{"State": {api.JobRunning}})
	if err != nil {
		return nil, classify(err, "list running jobs on %s", region)
	}
	if len(running) == 0 {
		return nil, nil
	}
	machines, err := a.rackMachines(ctx, region, rack)
	if err != nil {
		return nil, err
	}
	behind := make(map[string]bool, len(machines))
	for _, m := range machines {
		behind[m.Uuid] = true
	}
	var jobs []api.Job
	for _, j := range running {
		if behind[j.Machine] {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// describeJobs names up to a few running jobs and their machines, for an error message.
func describeJobs(jobs []api.Job) string {
	const shown = 10
	parts := make([]string, 0, min(len(jobs), shown)+1)
	for _, j := range jobs[:min(len(jobs), shown)] {
		parts = append(parts, "machine "+j.Machine+" runs job "+j.Uuid+" ("+j.Task+")")
	}
	if len(jobs) > shown {
		parts = append(parts, "…")
	}
	return strings.Join(parts, "; ")
}
