package moves

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/ironflow/ironflow/workflows"
)

// ProgressInterval is how often Wait asks a running move for its progress.
const ProgressInterval = 500 * time.Millisecond

// queryTimeout bounds one progress query: without a live worker a query waits for one.
const queryTimeout = 5 * time.Second

// StoppedError is a wait that ended because its context did: the move goes on.
type StoppedError struct {
	Subject string // "migration", "rack transfer", "bulk migration"
	ID      string // the workflow ID
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped waiting; the %s continues in the background", e.Subject)
}

// Wait waits for run to end and returns its result. With progress set it asks the run for
// its progress every ProgressInterval, and once more at the end (the final phase is usually
// set just before the workflow returns), and calls progress with each answer. A cancelled
// or failed run is an error that says so in plain words; a wait whose ctx ends is a
// *StoppedError.
func (k Kind[In, Prog, Res]) Wait(ctx context.Context, tc client.Client, run client.WorkflowRun, progress func(Prog)) (Res, error) {
	var res Res
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, &res) }()
	poll := func() {
		if progress == nil {
			return
		}
		p, err := k.query(ctx, tc, run.GetID(), run.GetRunID())
		if err != nil {
			return // not answered yet (first workflow task pending) or gone: try again later
		}
		progress(p)
	}
	ticker := time.NewTicker(ProgressInterval)
	defer ticker.Stop()
	for {
		select {
		case err := <-done:
			if ctx.Err() == nil && longPollCut(err) {
				// The history long poll was cut short (the SDK ends it a little before ctx's
				// deadline), not the run: ask again, and ctx's end decides.
				go func() { done <- run.Get(ctx, &res) }()
				continue
			}
			poll()
			return res, k.waitError(ctx, run.GetID(), err)
		case <-ticker.C:
			poll()
		}
	}
}

// longPollCut reports a transport error that ended a wait for a run's result without the
// run having ended.
func longPollCut(err error) bool {
	var canceled *serviceerror.Canceled
	var deadline *serviceerror.DeadlineExceeded
	switch code := grpcstatus.Code(err); {
	case errors.As(err, &canceled), errors.As(err, &deadline):
		return true
	default:
		return code == codes.Canceled || code == codes.DeadlineExceeded
	}
}

func (k Kind[In, Prog, Res]) waitError(ctx context.Context, id string, err error) error {
	switch {
	case ctx.Err() != nil:
		return &StoppedError{Subject: k.subject, ID: id}
	case temporal.IsCanceledError(err):
		// A compensation that fails turns the cancellation into a failure instead.
		return fmt.Errorf("%s %s was canceled; %s", k.noun, id, k.undone)
	case err != nil:
		return fmt.Errorf("%s %s failed: %s", k.noun, id, FailureMessage(err))
	}
	return nil
}

// query asks run runID of workflow id (the latest, for a kind that continues as new) for
// its progress.
func (k Kind[In, Prog, Res]) query(ctx context.Context, tc client.Client, id, runID string) (Prog, error) {
	if k.latestRun {
		runID = "" // after continue-as-new the first run no longer answers
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var p Prog
	answer, err := tc.QueryWorkflow(ctx, id, runID, workflows.ProgressQuery)
	if err != nil {
		return p, fmt.Errorf("progress of %s (is a worker running?): %w", id, err)
	}
	if err := answer.Get(&p); err != nil {
		return p, fmt.Errorf("progress of %s: %w", id, err)
	}
	return p, nil
}

// Detail is one run with its input, and its progress while it runs or its result or
// failure once it ended.
type Detail[In, Prog, Res any] struct {
	Run
	Input    *In    `json:"Input,omitempty"`
	Progress *Prog  `json:"Progress,omitempty"`
	Result   *Res   `json:"Result,omitempty"`
	Failure  string `json:"Failure,omitempty"`
}

// Show gathers the detail of r, a run of kind k. A running one whose progress cannot be
// queried (no worker) is still shown: unanswered says why its Progress is missing.
func (k Kind[In, Prog, Res]) Show(ctx context.Context, tc client.Client, dc converter.DataConverter, r Run) (d Detail[In, Prog, Res], unanswered, err error) {
	d.Run = r
	in, err := runInput[In](ctx, tc, dc, r.WorkflowID, r.RunID)
	if err != nil {
		return d, nil, err
	}
	if k.redact != nil {
		in = k.redact(in)
	}
	d.Input = &in
	if r.Running() {
		if k.noProgress {
			return d, nil, nil
		}
		p, err := k.query(ctx, tc, r.WorkflowID, r.RunID)
		if err != nil {
			return d, err, nil
		}
		d.Progress = &p
		return d, nil, nil
	}
	var res Res
	if err := tc.GetWorkflow(ctx, r.WorkflowID, r.RunID).Get(ctx, &res); err != nil {
		d.Failure = FailureMessage(err)
	} else {
		d.Result = &res
	}
	return d, nil, nil
}

// runInput reads the input of a run from its first history event, decoding it with tc's
// data converter dc (the SDK hands history payloads over as they are stored).
func runInput[In any](ctx context.Context, tc client.Client, dc converter.DataConverter, id, runID string) (In, error) {
	var in In
	events := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !events.HasNext() {
		return in, fmt.Errorf("migration %s has no history", id)
	}
	first, err := events.Next()
	if err != nil {
		return in, fmt.Errorf("history of migration %s: %w", id, err)
	}
	started := first.GetWorkflowExecutionStartedEventAttributes()
	if started == nil {
		return in, fmt.Errorf("history of migration %s does not start with its input", id)
	}
	if err := dc.FromPayloads(started.GetInput(), &in); err != nil {
		return in, fmt.Errorf("input of migration %s: %w", id, err)
	}
	return in, nil
}

// FailureMessage says why a run failed without the SDK's wrapping: the message of the first
// application error (the workflow's own, or the activity's that failed it), else the cause.
func FailureMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return PlainError(appErr.Message())
	}
	var wfErr *temporal.WorkflowExecutionError
	if errors.As(err, &wfErr) {
		if cause := errors.Unwrap(wfErr); cause != nil {
			return PlainError(cause.Error())
		}
	}
	return PlainError(err.Error())
}

// temporalNoise is what the SDK adds to an error's text when it passes an activity or a child
// workflow (event IDs, worker identity, error type): useful in a history, noise to a user.
var temporalNoise = regexp.MustCompile(
	`activity error \(type: [^,]*, scheduledEventID: \d+, startedEventID: \d+, identity: [^)]*\): ` +
		`|child workflow execution error \(type: [^,]*, workflowID: [^,]*, runID: [^,]*, initiatedEventID: \d+, startedEventID: \d+\): ` +
		`| \(type: \w+, retryable: (true|false)\)`)

// PlainError is an error text a workflow recorded, without the SDK's wrapping.
func PlainError(text string) string {
	return temporalNoise.ReplaceAllString(text, "")
}
