package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
)

// Window bounds of BulkMigrate (MaxBulkWindow also of TransferRack and of set-window): how
// many machines migrate at once.
const (
	DefaultBulkWindow = 5
	MaxBulkWindow     = 50
)

// DefaultBulkMachinesPerRun is how many machines one run of BulkMigrate migrates before it
// continues as new with the rest, which keeps each run's history a few thousand events long.
const DefaultBulkMachinesPerRun = 500

// maxFailureMessage bounds the failure message kept per machine: the messages travel in
// the continue-as-new input and the result.
const maxFailureMessage = 500

// BulkMigrateID is the workflow ID of the bulk migration called name. A Temporal Schedule
// appends the scheduled time to it for each run it starts.
func BulkMigrateID(name string) string { return "bulk-migrate/" + name }

// BulkMigrateStartOptions are the options to start the bulk migration called name now: a
// running one of the same name makes the start fail.
func BulkMigrateStartOptions(name string) client.StartWorkflowOptions {
	return startOptions(BulkMigrateID(name))
}

// BulkMigrateInput selects machines on SourceRegion and migrates each to TargetRegion with
// a MigrateMachine child workflow, at most Window at once.
type BulkMigrateInput struct {
	SourceRegion string
	TargetRegion string
	Selector     activities.Selector
	// Window is how many machines migrate at once, at most MaxBulkWindow: on the batched path
	// split over two batches (0: 8 in each), on the per-machine path 0 means DefaultBulkWindow.
	Window int
	// SkipMachineDestroy and WaitForRunningJob are passed to every MigrateMachine.
	SkipMachineDestroy *bool
	WaitForRunningJob  time.Duration
	// Grant is the source region's bulk grant for Selector and TargetRegion; every
	// MigrateMachine child carries it (region/api/grants.go).
	Grant string `json:",omitempty"`
	// MachinesPerRun is how many machines a run migrates before it continues as new; 0 means
	// DefaultBulkMachinesPerRun. Part of the input so every run, and its replay, agree on it.
	MachinesPerRun int `json:",omitempty"`
	// MachinesPerBatch is how many machines one batch moves, 1..50 (0: 50).
	MachinesPerBatch int `json:",omitempty"`
	// Continuation is set by the workflow itself when it continues as new: the machines left
	// and what earlier runs did. Leave it nil when starting a bulk migration.
	Continuation *BulkContinuation `json:",omitempty"`
}

// BulkContinuation carries a bulk migration across continue-as-new.
type BulkContinuation struct {
	Remaining []string // machine UUIDs not started yet, in order
	Done      BulkMigrateResult
	// Paused is an operator's pause (PauseUpdate) the next run keeps; the window an
	// operator set (SetWindowUpdate) is the next run's Window.
	Paused bool `json:",omitempty"`
}

// BulkMigrateResult lists what happened to each selected machine, by UUID.
type BulkMigrateResult struct {
	Total     int
	Succeeded []string
	Failed    []MachineFailure
	Skipped   []MachineSkip `json:",omitempty"` // being migrated by another migration
}

// MachineFailure is a machine whose migration failed, and why.
type MachineFailure struct {
	Machine string // UUID
	Error   string
}

// BulkProgress is the answer of BulkMigrate's progress query. Done counts the machines
// migrated, Failed those whose migration failed (or could not start), Running those migrating
// now; the rest of Total have not started.
type BulkProgress struct {
	Total          int
	Done           int
	Failed         int
	Running        int
	FailedMachines []MachineFailure
	Skipped        int // being migrated by another migration
	// Paused and Window are the operator's controls (ControlState): Window is how many
	// machines run at once from the next start on (0: the default).
	Paused bool `json:",omitempty"`
	Window int  `json:",omitempty"`
}

// BulkMigrate migrates the machines a selector chooses, each with a MigrateMachine child
// workflow, keeping at most Window children running (ARCHITECTURE.md "Moves"). A machine
// whose migration fails, or is already being migrated, is recorded and the others go on.
// Cancelling the bulk migration cancels the running children, which undo their steps, and
// starts no more. After MachinesPerRun machines it continues as new with the rest.
func BulkMigrate(ctx workflow.Context, in BulkMigrateInput) (BulkMigrateResult, error) {
	b := &bulkMigration{in: in}
	if err := workflow.SetQueryHandlerWithOptions(ctx, ProgressQuery, b.query, workflow.QueryHandlerOptions{Description: progressDescription}); err != nil {
		return BulkMigrateResult{}, fmt.Errorf("register progress query: %w", err)
	}
	reportDetails(ctx, b.query)
	if err := b.ctl.register(ctx, in.SourceRegion, workflow.GetInfo(ctx).WorkflowExecution.ID, in.Window); err != nil {
		return BulkMigrateResult{}, err
	}
	if err := in.Check(); err != nil {
		return BulkMigrateResult{}, temporal.NewNonRetryableApplicationError("invalid bulk migration input: "+err.Error(), ErrTypeInvalidInput, nil)
	}
	if err := checkOwnID(ctx, "the bulk migration", bulkMigrateIDFor(workflow.GetInfo(ctx).WorkflowExecution.ID)); err != nil {
		return BulkMigrateResult{}, err
	}
	if c := in.Continuation; c != nil {
		b.ctl.state.Paused = c.Paused
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, SourceRegionKey.ValueSet(in.SourceRegion), TargetRegionKey.ValueSet(in.TargetRegion)); err != nil {
		return BulkMigrateResult{}, fmt.Errorf("upsert search attributes: %w", err)
	}
	machines, err := b.machines(ctx)
	if err != nil {
		return BulkMigrateResult{}, err
	}
	n := min(len(machines), in.machinesPerRun())
	thisRun, rest := machines[:n], machines[n:]
	b.migrate(ctx, thisRun)
	b.ctl.finish(ctx)
	if ctx.Err() != nil {
		return b.result, ctx.Err()
	}
	if len(rest) > 0 {
		next := in
		next.Window = b.ctl.windowOr(in.Window)
		next.Continuation = &BulkContinuation{Remaining: rest, Done: b.result, Paused: b.ctl.state.Paused}
		return BulkMigrateResult{}, workflow.NewContinueAsNewError(ctx, BulkMigrate, next)
	}
	return b.result, nil
}

// Check refuses an input the workflow would refuse, so callers can refuse it before starting.
func (in BulkMigrateInput) Check() error {
	var problems []error
	if in.SourceRegion == "" || in.TargetRegion == "" {
		problems = append(problems, errors.New("SourceRegion and TargetRegion are required"))
	} else if in.SourceRegion == in.TargetRegion {
		problems = append(problems, fmt.Errorf("source and target region are both %q", in.SourceRegion))
	}
	if in.Window < 0 || in.Window > MaxBulkWindow {
		problems = append(problems, fmt.Errorf("Window %d is not between 1 and %d (0: %d)", in.Window, MaxBulkWindow, DefaultBulkWindow))
	}
	if in.MachinesPerRun < 0 {
		problems = append(problems, errors.New("MachinesPerRun must not be negative"))
	}
	if err := checkBatchSize(in.MachinesPerBatch); err != nil {
		problems = append(problems, err)
	}
	if in.WaitForRunningJob < 0 {
		problems = append(problems, errors.New("WaitForRunningJob must not be negative"))
	}
	if in.Continuation == nil {
		if err := in.Selector.Check(); err != nil {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

func (in BulkMigrateInput) window() int {
	if in.Window == 0 {
		return DefaultBulkWindow
	}
	return in.Window
}

func (in BulkMigrateInput) machinesPerRun() int {
	if in.MachinesPerRun == 0 {
		return DefaultBulkMachinesPerRun
	}
	return in.MachinesPerRun
}

// bulkMigration is the state of one BulkMigrate run.
type bulkMigration struct {
	in      BulkMigrateInput
	result  BulkMigrateResult
	running int
	ctl     moveControls
}

// machines returns the machines left to migrate: the continuation's, or those the selector
// chooses on the source region.
func (b *bulkMigration) machines(ctx workflow.Context) ([]string, error) {
	if c := b.in.Continuation; c != nil {
		b.result = c.Done
		return c.Remaining, nil
	}
	var machines []string
	sel := activities.SelectInput{Region: b.in.SourceRegion, Selector: b.in.Selector, TargetRegion: b.in.TargetRegion, Grant: b.in.Grant}
	if err := call(ctx, regionCallOptions, acts.SelectMachines, sel, &machines); err != nil {
		return nil, err
	}
	b.result.Total = len(machines)
	return machines, nil
}

// migrate runs a MigrateMachine child per machine, starting the next one whenever one ends,
// until all have ended. Once ctx is cancelled it starts no more and waits for the running
// children, which the cancellation reaches, to finish undoing their steps.
//
// Runs that take the batched path (batchChange) first move the machines in batches
// (migrateBatches); the machines the batches leave to it then take this path.
func (b *bulkMigration) migrate(ctx workflow.Context, machines []string) {
	if workflow.GetVersion(ctx, batchChange, workflow.DefaultVersion, 1) >= 1 {
		if machines = b.migrateBatches(ctx, machines); ctx.Err() != nil {
			return
		}
	}
	runWindowed(ctx, machines, &b.ctl, func() int { return b.ctl.windowOr(b.in.window()) }, nil, b.start, func(machine string, f workflow.Future) {
		b.running--
		err := f.Get(ctx, nil)
		if skip, ok := skippedChild(machine, err); ok {
			b.result.Skipped = append(b.result.Skipped, skip)
			return
		}
		if err != nil {
			b.result.Failed = append(b.result.Failed, MachineFailure{Machine: machine, Error: failureOf(machine, err)})
			return
		}
		b.result.Succeeded = append(b.result.Succeeded, machine)
	})
}

// migrateBatches moves machines on the batched path, recording each one's outcome, and
// returns those that need the per-machine path. A failed machine does not stop the others.
func (b *bulkMigration) migrateBatches(ctx workflow.Context, machines []string) []string {
	var perMachine []string
	in := MigrateMachineBatchInput{SourceRegion: b.in.SourceRegion, TargetRegion: b.in.TargetRegion, Grant: b.in.Grant, MoveRun: moveRunOf(ctx)}
	runBatches(ctx, workflow.GetInfo(ctx).WorkflowExecution.ID, in, machines, batchSize(b.in.MachinesPerBatch), &b.ctl, b.in.Window, nil, &b.running, func(res activities.BatchResult) {
		b.result.Succeeded = append(b.result.Succeeded, res.Moved...)
		for _, f := range res.Failed {
			b.result.Failed = append(b.result.Failed, MachineFailure{Machine: f.Machine, Error: truncated(f.Error)})
		}
		perMachine = append(perMachine, res.PerMachine...)
	})
	return perMachine
}

// runWindowed calls start for each item in order, keeping at most window() of the futures it
// returns pending, and calls done with each one as it resolves, until all started have
// resolved. It starts no more items once ctx is cancelled, or once more (when not nil) says
// no, and none while ctl is paused; a change of ctl (an operator's Update) lets it start
// more at once.
func runWindowed[T any](ctx workflow.Context, items []T, ctl *moveControls, window func() int, more func() bool, start func(workflow.Context, T) workflow.Future, done func(T, workflow.Future)) {
	sel := workflow.NewSelector(ctx)
	if ctl.wake != nil {
		sel.AddReceive(ctl.wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	}
	running, next := 0, 0
	stopped := func() bool { return ctx.Err() != nil || (more != nil && !more()) }
	for {
		for running < window() && next < len(items) && !stopped() && !ctl.state.Paused {
			item := items[next]
			next++
			running++
			sel.AddFuture(start(ctx, item), func(f workflow.Future) {
				running--
				done(item, f)
			})
		}
		if running == 0 {
			if next == len(items) || stopped() {
				return
			}
			// Paused with nothing running: wait for the resume (or a cancel).
			_ = workflow.Await(ctx, func() bool { return !ctl.state.Paused })
			continue
		}
		sel.Select(ctx)
	}
}

// start starts the MigrateMachine child of one machine; it counts as running until
// migrate's done sees it end.
func (b *bulkMigration) start(ctx workflow.Context, machine string) workflow.Future {
	b.running++
	return startMigrateMachine(ctx, MigrateMachineInput{
		SourceRegion:       b.in.SourceRegion,
		TargetRegion:       b.in.TargetRegion,
		Machine:            machine,
		SkipMachineDestroy: b.in.SkipMachineDestroy,
		WaitForRunningJob:  b.in.WaitForRunningJob,
		Grant:              b.in.Grant,
		MoveRun:            moveRunOf(ctx),
	})
}

// failureOf says why a child failed, without the SDK's wrapping, in at most
// maxFailureMessage bytes.
func failureOf(machine string, err error) string {
	var msg string
	var appErr *temporal.ApplicationError
	switch {
	case temporal.IsWorkflowExecutionAlreadyStartedError(err):
		msg = fmt.Sprintf("machine %s is already being migrated by %s", machine, MigrateMachineID(machine))
	case temporal.IsCanceledError(err):
		msg = "migration canceled"
	case errors.As(err, &appErr):
		msg = appErr.Message()
	default:
		msg = err.Error()
		if cause := errors.Unwrap(err); cause != nil {
			msg = cause.Error()
		}
	}
	return truncated(msg)
}

// truncated is msg in at most maxFailureMessage bytes.
func truncated(msg string) string {
	if len(msg) > maxFailureMessage {
		msg = msg[:maxFailureMessage] + "..."
	}
	return msg
}

func (b *bulkMigration) query() (BulkProgress, error) {
	return BulkProgress{
		Total:          b.result.Total,
		Done:           len(b.result.Succeeded),
		Failed:         len(b.result.Failed),
		Running:        b.running,
		FailedMachines: append([]MachineFailure(nil), b.result.Failed...),
		Skipped:        len(b.result.Skipped),
		Paused:         b.ctl.state.Paused,
		Window:         b.ctl.current().Window,
	}, nil
}
