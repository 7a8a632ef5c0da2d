package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Phases of a saga's undo, in the MigrationPhase search attribute.
const (
	PhaseCompensating      = "compensating"
	PhaseCompensationStuck = "compensation-stuck" // an undo failed compensationStuckAfter times in a row
)

// Compensation retries: an undo that fails is tried again after a backoff that doubles up to
// compensationMaxBackoff, until it succeeds or an operator abandons it (CompensationUpdate).
const (
	compensationFirstBackoff = 30 * time.Second
	compensationMaxBackoff   = 10 * time.Minute
	compensationStuckAfter   = 3
)

// A stuck undo backs off further, up to compensationStuckMaxBackoff (stuckUndoBackoffChange),
// so an undo stuck for long adds some 50 events a day to the history instead of some 900; the
// operator's retry runs it at once.
const (
	compensationStuckMaxBackoff = 4 * time.Hour
	stuckUndoBackoffChange      = "stuck-undo-backoff"
)

// CompensationUpdate is the Update an operator sends to a saga whose undo keeps failing.
const CompensationUpdate = "compensation"

// Operator actions of CompensationUpdate.
const (
	CompensationRetry   = "retry"   // try the failing undo again now
	CompensationAbandon = "abandon" // stop undoing; the workflow fails naming what was not undone
)

// CompensationRequest is the argument of CompensationUpdate. Reason and By are recorded in
// the workflow's progress, with the time, as the audit of the action.
type CompensationRequest struct {
	Action string
	Reason string
	By     string // who asks; the CLI fills in the caller's identity
}

// Check refuses a request the update validator refuses.
func (r CompensationRequest) Check() error {
	var problems []error
	if r.Action != CompensationRetry && r.Action != CompensationAbandon {
		problems = append(problems, fmt.Errorf("action %q is neither %q nor %q", r.Action, CompensationRetry, CompensationAbandon))
	}
	if strings.TrimSpace(r.Reason) == "" {
		problems = append(problems, errors.New("a reason is required"))
	}
	if strings.TrimSpace(r.By) == "" {
		problems = append(problems, errors.New("who asks (By) is required"))
	}
	return errors.Join(problems...)
}

// ErrCompensationAbandoned is the error type of a saga whose undo an operator abandoned.
const ErrCompensationAbandoned = "CompensationAbandoned"

// Compensations is a saga's stack of undo actions. Steps add their undo before they run (an
// undo must be idempotent: the step may have taken effect even when its activity failed).
type Compensations struct {
	stack []compensation
	// Retrying makes Run retry a failing undo until it succeeds (runs recorded before it
	// tried each undo once and went on with the next).
	Retrying bool
	// Stops reports an undo error after which the undos below it must not run (they would
	// destroy the last copy of something): Run stops there and returns it.
	Stops func(error) bool
	// SetPhase, when set, is told the compensating and compensation-stuck phases.
	SetPhase func(workflow.Context, string)
	// OnError, when not nil, is told about each failure of an undo as it happens.
	OnError func(name string, err error)
	// OnOperator, when not nil, is told about each accepted operator request.
	OnOperator func(string)
	// Audit, when not nil, records each operator request as Run acts on it, with the name of
	// the undo that was failing (an audit event on the region).
	Audit func(ctx workflow.Context, req CompensationRequest, compensation string)

	failing string               // name of the undo failing now, "" when none
	pending *CompensationRequest // operator request not acted on yet
}

type compensation struct {
	name string
	undo func(workflow.Context) error
}

// Add pushes the undo of a step.
func (c *Compensations) Add(name string, undo func(workflow.Context) error) {
	c.stack = append(c.stack, compensation{name: name, undo: undo})
}

// Len is the number of pending compensations.
func (c *Compensations) Len() int { return len(c.stack) }

// Commit forgets every compensation: the work they would undo is now final.
func (c *Compensations) Commit() { c.stack = nil }

// Pending names the compensations not run yet, the next one to run first.
func (c *Compensations) Pending() []string {
	var names []string
	for i := len(c.stack) - 1; i >= 0; i-- {
		names = append(names, c.stack[i].name)
	}
	return names
}

// RegisterUpdate registers the operator's CompensationUpdate on the workflow.
func (c *Compensations) RegisterUpdate(ctx workflow.Context) error {
	validator := func(ctx workflow.Context, req CompensationRequest) error { return refusal(c.validate(ctx, req)) }
	return workflow.SetUpdateHandlerWithOptions(ctx, CompensationUpdate, c.operator, workflow.UpdateHandlerOptions{Validator: validator, Description: compensateDescription})
}

// validate accepts a well-formed request while an undo is failing and none is pending.
func (c *Compensations) validate(_ workflow.Context, req CompensationRequest) error {
	if err := req.Check(); err != nil {
		return err
	}
	if c.failing == "" {
		return errors.New("no compensation is failing: nothing to retry or abandon")
	}
	if c.pending != nil {
		return fmt.Errorf("an operator request (%s by %s) is already pending", c.pending.Action, c.pending.By)
	}
	return nil
}

func (c *Compensations) operator(ctx workflow.Context, req CompensationRequest) (string, error) {
	c.pending = &req
	note := fmt.Sprintf("%s: operator %s asked to %s compensation %s: %s", workflow.Now(ctx).UTC().Format(time.RFC3339), req.By, req.Action, c.failing, req.Reason)
	workflow.GetLogger(ctx).Warn("compensation operator request", "action", req.Action, "by", req.By, "reason", req.Reason, "compensation", c.failing)
	if c.OnOperator != nil {
		c.OnOperator(note)
	}
	return note, nil
}

// Run runs every compensation in reverse order on a context disconnected from ctx, so they
// also run after the workflow was cancelled. When Retrying, a failing undo is retried with a
// capped backoff until it succeeds, an operator abandons it, or Stops says the undos below it
// must not run; otherwise (runs recorded before) a failing undo does not stop the others and
// all failures are returned joined. Each failure names its compensation.
func (c *Compensations) Run(ctx workflow.Context) error {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if c.SetPhase != nil {
		c.SetPhase(dctx, PhaseCompensating)
	}
	var errs []error
	for len(c.stack) > 0 {
		comp := c.stack[len(c.stack)-1]
		err := c.runOne(dctx, comp)
		switch {
		case err == nil:
		case !c.Retrying:
			errs = append(errs, err)
		default:
			return err // the stack keeps what was not undone
		}
		c.stack = c.stack[:len(c.stack)-1]
	}
	return errors.Join(errs...)
}

// maxBackoff is the longest wait before the next try of an undo that failed attempt times.
// GetVersion is asked only once the undo is stuck.
func (c *Compensations) maxBackoff(ctx workflow.Context, attempt int) time.Duration {
	if attempt >= compensationStuckAfter && workflow.GetVersion(ctx, stuckUndoBackoffChange, workflow.DefaultVersion, 1) >= 1 {
		return compensationStuckMaxBackoff
	}
	return compensationMaxBackoff
}

// runOne runs one undo, retrying it while Retrying.
func (c *Compensations) runOne(ctx workflow.Context, comp compensation) error {
	defer func() { c.failing, c.pending = "", nil }()
	backoff := compensationFirstBackoff
	for attempt := 1; ; attempt++ {
		err := comp.undo(ctx)
		if err == nil {
			if attempt > compensationStuckAfter && c.SetPhase != nil {
				c.SetPhase(ctx, PhaseCompensating)
			}
			return nil
		}
		err = fmt.Errorf("compensation %s: %w", comp.name, err)
		workflow.GetLogger(ctx).Error("compensation failed", "compensation", comp.name, "attempt", attempt, "error", err)
		if c.OnError != nil && attempt <= compensationStuckAfter { // a stuck undo is not reported again and again
			c.OnError(comp.name, err)
		}
		if !c.Retrying || (c.Stops != nil && c.Stops(err)) {
			return err
		}
		c.failing = comp.name
		if attempt == compensationStuckAfter && c.SetPhase != nil {
			c.SetPhase(ctx, PhaseCompensationStuck)
		}
		if _, werr := workflow.AwaitWithTimeout(ctx, backoff, func() bool { return c.pending != nil }); werr != nil {
			return errors.Join(err, werr)
		}
		backoff = min(2*backoff, c.maxBackoff(ctx, attempt))
		if req := c.pending; req != nil {
			c.pending = nil
			if c.Audit != nil {
				c.Audit(ctx, *req, comp.name)
			}
			if req.Action == CompensationAbandon {
				return temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("operator %s abandoned the compensation (%s); not undone: %s; last failure: %v", req.By, req.Reason, strings.Join(c.Pending(), ", "), err),
					ErrCompensationAbandoned, err)
			}
		}
	}
}
