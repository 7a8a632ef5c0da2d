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

// bulkBoundedChange is the GetVersion change ID of BulkMigrate's bounded state: a run takes
// its machines a page at a time after the selection's cursor (SelectMachinesPage) and carries
// counts, at most maxBulkSample failures and skips, and the cursor across continue-as-new, so
// every payload stays bounded whatever the number of machines. Runs recorded before it select
// every machine at once and carry every UUID and failure.
const bulkBoundedChange = "bulk-bounded-state"

// maxBulkSample bounds the failures and the skips a bulk run keeps in its progress,
// continuation and result (the first ones, each message at most maxFailureMessage bytes):
// some 60 KB. Every machine's outcome stays in the result of the child that moved it.
const maxBulkSample = 100

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
	// After is the selection's cursor (activities.SelectPage.Last) after the machines the
	// earlier runs took: the next run selects the machines after it.
	After string `json:",omitempty"`
	// Remaining are machine UUIDs not started yet, in order, as runs recorded before
	// bulkBoundedChange carry them; the runs after them carry the rest the same way.
	Remaining []string `json:",omitempty"`
	Done      BulkMigrateResult
	// Paused is an operator's pause (PauseUpdate) the next run keeps; the window an
	// operator set (SetWindowUpdate) is the next run's Window.
	Paused bool `json:",omitempty"`
}

// BulkMigrateResult counts what happened to the selected machines and names the first
// failed and skipped ones. Every machine's outcome is in the result of its child: its batch
// (MigrateMachineBatchID) or its MigrateMachine (moves.BulkFailures lists them).
type BulkMigrateResult struct {
	Total int
	// Migrated, FailedCount and SkippedCount count the machines of every run; a result of a
	// run recorded before bulkBoundedChange may leave them 0 and list every machine (Counts
	// reads both).
	Migrated     int `json:",omitempty"`
	FailedCount  int `json:",omitempty"`
	SkippedCount int `json:",omitempty"`
	// Succeeded lists the machines migrated by runs recorded before bulkBoundedChange only.
	Succeeded []string `json:",omitempty"`
	// Failed and Skipped (being migrated by another migration) are the first maxBulkSample
	// (every one before bulkBoundedChange).
	Failed  []MachineFailure
	Skipped []MachineSkip `json:",omitempty"`
}

// Counts are how many machines migrated, failed and were skipped, from the counts or, in a
// result recorded before they were kept, the lists.
func (r BulkMigrateResult) Counts() (migrated, failed, skipped int) {
	return max(r.Migrated, len(r.Succeeded)), max(r.FailedCount, len(r.Failed)), max(r.SkippedCount, len(r.Skipped))
}

// MachineFailure is a machine whose migration failed, and why.
type MachineFailure struct {
	Machine string // UUID; the name, for a machine of a Names selector that no longer exists
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
	FailedMachines []MachineFailure // the first maxBulkSample
	Skipped        int              // being migrated by another migration
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
	b.bounded = workflow.GetVersion(ctx, bulkBoundedChange, workflow.DefaultVersion, 1) >= 1
	thisRun, more, err := b.thisRun(ctx)
	if err != nil {
		return BulkMigrateResult{}, err
	}
	b.migrate(ctx, thisRun)
	b.ctl.finish(ctx)
	if ctx.Err() != nil {
		return b.result, ctx.Err()
	}
	if more {
		next := in
		next.Window = b.ctl.windowOr(in.Window)
		next.Continuation = &BulkContinuation{After: b.after, Remaining: b.remaining, Done: b.result, Paused: b.ctl.state.Paused}
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
	// bounded: the run keeps at most maxBulkSample failures and skips and selects a page
	// at a time (bulkBoundedChange).
	bounded bool
	// after is the selection's cursor after this run's machines; remaining the machines
	// listed up front and left to later runs (runs before bulkBoundedChange, and those after
	// them).
	after     string
	remaining []string
}

// thisRun returns the machines this run migrates, at most MachinesPerRun, and whether more
// are left to later runs.
func (b *bulkMigration) thisRun(ctx workflow.Context) ([]string, bool, error) {
	perRun := b.in.machinesPerRun()
	c := b.in.Continuation
	if c != nil {
		b.resume(c)
	}
	if b.bounded && (c == nil || len(c.Remaining) == 0) {
		return b.selectPages(ctx, perRun)
	}
	machines, err := b.listed(ctx)
	if err != nil {
		return nil, false, err
	}
	n := min(len(machines), perRun)
	b.remaining = machines[n:]
	return machines[:n], len(b.remaining) > 0, nil
}

// resume takes over what the earlier runs did, counted, and bounded when this run is.
func (b *bulkMigration) resume(c *BulkContinuation) {
	b.result, b.after = c.Done, c.After
	b.result.Migrated, b.result.FailedCount, b.result.SkippedCount = b.result.Counts()
	if b.bounded {
		b.result.Succeeded = nil
		b.result.Failed = b.result.Failed[:min(len(b.result.Failed), maxBulkSample)]
		b.result.Skipped = b.result.Skipped[:min(len(b.result.Skipped), maxBulkSample)]
	}
}

// listed returns the machines listed up front: the continuation's, or, in a run recorded
// before bulkBoundedChange, every machine the selector chooses on the source region.
func (b *bulkMigration) listed(ctx workflow.Context) ([]string, error) {
	if c := b.in.Continuation; c != nil {
		return c.Remaining, nil
	}
	var machines []string
	if err := call(ctx, regionCallOptions, acts.SelectMachines, b.selection(), &machines); err != nil {
		return nil, err
	}
	b.result.Total = len(machines)
	return machines, nil
}

// selectPages returns up to limit machines of the selection after the cursor, a page of at
// most activities.MaxSelectPage at a time, and whether the selection has more after them.
// Names the selection gives that no machine has any more count as failed. Total is what the
// earlier runs counted and what the selection has left.
func (b *bulkMigration) selectPages(ctx workflow.Context, limit int) ([]string, bool, error) {
	counted := b.result.Migrated + b.result.FailedCount + b.result.SkippedCount
	var machines []string
	for taken := 0; ; {
		in := activities.SelectPageInput{SelectInput: b.selection(), After: b.after, Limit: min(activities.MaxSelectPage, limit-taken)}
		var page activities.SelectPage
		if err := call(ctx, regionCallOptions, acts.SelectMachinesPage, in, &page); err != nil {
			return nil, false, err
		}
		if taken == 0 {
			b.result.Total = counted + page.Left
		}
		for _, name := range page.NotFound {
			b.failed(MachineFailure{Machine: name, Error: fmt.Sprintf("no machine named %s on region %s any more", name, b.in.SourceRegion)})
		}
		machines = append(machines, page.Machines...)
		n := len(page.Machines) + len(page.NotFound)
		taken += n
		if n == 0 || n == page.Left {
			return machines, false, nil
		}
		b.after = page.Last
		if taken == limit {
			return machines, true, nil
		}
	}
}

// selection is the source region's selection of the machines, with the grant.
func (b *bulkMigration) selection() activities.SelectInput {
	return activities.SelectInput{Region: b.in.SourceRegion, Selector: b.in.Selector, TargetRegion: b.in.TargetRegion, Grant: b.in.Grant}
}

// succeeded, failed and skipped record a machine's outcome: counted, and listed while the
// run keeps them (Succeeded only before bulkBoundedChange).
func (b *bulkMigration) succeeded(machine string) {
	b.result.Migrated++
	if !b.bounded {
		b.result.Succeeded = append(b.result.Succeeded, machine)
	}
}

func (b *bulkMigration) failed(f MachineFailure) {
	b.result.FailedCount++
	if !b.bounded || len(b.result.Failed) < maxBulkSample {
		b.result.Failed = append(b.result.Failed, f)
	}
}

func (b *bulkMigration) skipped(s MachineSkip) {
	b.result.SkippedCount++
	if !b.bounded || len(b.result.Skipped) < maxBulkSample {
		b.result.Skipped = append(b.result.Skipped, s)
	}
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
			b.skipped(skip)
			return
		}
		if err != nil {
			b.failed(MachineFailure{Machine: machine, Error: failureOf(machine, err)})
			return
		}
		b.succeeded(machine)
	})
}

// migrateBatches moves machines on the batched path, recording each one's outcome, and
// returns those that need the per-machine path. A failed machine does not stop the others.
func (b *bulkMigration) migrateBatches(ctx workflow.Context, machines []string) []string {
	var perMachine []string
	in := MigrateMachineBatchInput{SourceRegion: b.in.SourceRegion, TargetRegion: b.in.TargetRegion, Grant: b.in.Grant, MoveRun: moveRunOf(ctx)}
	runBatches(ctx, workflow.GetInfo(ctx).WorkflowExecution.ID, in, machines, batchSize(b.in.MachinesPerBatch), &b.ctl, b.in.Window, nil, &b.running, func(res activities.BatchResult) {
		for _, m := range res.Moved {
			b.succeeded(m)
		}
		for _, f := range res.Failed {
			b.failed(MachineFailure{Machine: f.Machine, Error: truncated(f.Error)})
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
		Done:           b.result.Migrated,
		Failed:         b.result.FailedCount,
		Running:        b.running,
		FailedMachines: append([]MachineFailure(nil), b.result.Failed[:min(len(b.result.Failed), maxBulkSample)]...),
		Skipped:        b.result.SkippedCount,
		Paused:         b.ctl.state.Paused,
		Window:         b.ctl.current().Window,
	}, nil
}
