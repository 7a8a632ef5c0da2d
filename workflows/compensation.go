package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// Compensations is a saga's stack of undo actions. Steps add their undo before they run (an
// undo must be idempotent: the step may have taken effect even when its activity failed).
type Compensations struct {
	stack []compensation
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

// Run runs every compensation in reverse order on a context disconnected from ctx, so they
// also run after the workflow was cancelled. A failing compensation does not stop the others;
// all failures are returned joined, each naming its compensation. onError, when not nil, is
// told about each failure as it happens.
func (c *Compensations) Run(ctx workflow.Context, onError func(name string, err error)) error {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	var errs []error
	for i := len(c.stack) - 1; i >= 0; i-- {
		comp := c.stack[i]
		if err := comp.undo(dctx); err != nil {
			err = fmt.Errorf("compensation %s: %w", comp.name, err)
			workflow.GetLogger(ctx).Error("compensation failed", "compensation", comp.name, "error", err)
			if onError != nil {
				onError(comp.name, err)
			}
			errs = append(errs, err)
		}
	}
	c.stack = nil
	return errors.Join(errs...)
}
