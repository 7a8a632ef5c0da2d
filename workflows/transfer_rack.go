package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/region/api"
)

// Phases of TransferRack besides the shared PhaseValidating, PhaseCompensating,
// PhaseCompleted, PhaseFailed and PhaseCanceled.
const (
	PhasePausingRack       = "pausing-rack"
	PhaseDrainingJobs      = "draining-jobs"
	PhaseCopyingNetwork    = "copying-network"
	PhaseMigratingMachines = "migrating-machines"
	PhaseRepointingRack    = "repointing-rack"
	PhaseRemovingRack      = "removing-rack-from-source"
	PhaseReleasing         = "releasing-operations"
)

// Error types of TransferRack: machine migrations failed; the rack's answer to the repoint
// was lost and its state could not be read, so nothing was undone.
const (
	ErrTypeMachinesFailed = "MachinesFailed"
	ErrRackStateUnknown   = "RackStateUnknown"
)

// DefaultTransferWindow is how many machines a transfer migrates at once when the input
// says nothing.
const DefaultTransferWindow = DefaultBulkWindow

// Rack-local activities, run by the rack's own worker on rackacts.TaskQueue(rack). A rack whose
// worker does not poll fails the step after rackCallOptions' schedule-to-close timeout.
var (
	rackActs        *rackacts.Activities
	rackCallOptions = workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy:            regionCallOptions.RetryPolicy,
	}
)

// TransferRackInput names the rack and the regions (names from the worker's regions file;
// the target's name is also the name of its rack secret in the rack's configuration).
type TransferRackInput struct {
	SourceRegion string
	TargetRegion string
	Rack         string // UUID
	// Window is how many machines migrate at once: on the batched path split over two
	// batches (0: 8 in each), on the per-machine path 0 means DefaultTransferWindow.
	Window int
	// WaitForRunningJob is how long each machine's migration waits for a job running on it
	// to end (MigrateMachineInput.WaitForRunningJob): in-flight jobs drain, then fail the
	// machine's migration.
	WaitForRunningJob time.Duration
	// Grant is the source region's rack grant for Rack and TargetRegion; every MigrateMachine
	// child carries it (region/api/grants.go).
	Grant string `json:",omitempty"`
	// MachinesPerBatch is how many machines one batch moves, 1..50 (0: 50); BatchesPerRun is
	// how many batches' worth of machines one run migrates before it continues as new with
	// the rest (0: DefaultTransferBatchesPerRun), which keeps each run's history bounded.
	// Part of the input so every run, and its replay, agree on them.
	MachinesPerBatch int `json:",omitempty"`
	BatchesPerRun    int `json:",omitempty"`
	// Continuation is set by the workflow itself when it continues as new during its machine
	// phase. Leave it nil when starting a transfer.
	Continuation *TransferContinuation `json:",omitempty"`
}

// TransferRackResult describes a finished transfer.
type TransferRackResult struct {
	RackName string
	Machines int
	Copied   api.RackImport
	Released int // queued operations released on the target
}

// TransferProgress is the answer of the progress query of TransferRack.
type TransferProgress struct {
	Phase          string
	MachinesTotal  int
	MachinesDone   int
	MachinesFailed int
	// MachinesSkipped are being migrated by another migration: the rack cannot move away
	// from them, so the transfer stops before its repoint, but they did not fail.
	MachinesSkipped int
	// MachinesRunning are migrating now, in batches or per-machine children.
	MachinesRunning int `json:",omitempty"`
	Errors          []string
	// Paused and Window are the operator's controls (ControlState): Window is how many
	// machines run at once from the next start on (0: the default).
	Paused bool `json:",omitempty"`
	Window int  `json:",omitempty"`
	// Operator lists the operator requests on a stuck undo (CompensationUpdate): when, who,
	// what and why.
	Operator []string `json:",omitempty"`
}

// TransferRack moves a rack controller, with everything it serves, from one region to
// another without forcing its deletion anywhere (ARCHITECTURE.md "Moves"):
//
//  1. validate: the rack is online on the source, the target answers, and the target has no
//     subnet with one of the rack's CIDRs, nor a machine with the Name or a MAC of one of its
//     machines (non-retryable, naming every conflict);
//  2. pause the rack on the source: operations for its machines are queued (undo: unpause);
//     then drain it: one activity waits, up to WaitForRunningJob, for the jobs running on its
//     machines to end (transfer_drain.go);
//  3. have the rack push its leases to the source, then copy its fabrics, VLANs, subnets (DHCP
//     settings, reserved IPs), the rack record (paused), its pods and leases to the target,
//     upserted by UUID (undo: delete what the copy created);
//  4. migrate every machine behind the rack: in batches (MigrateMachineBatch children), and
//     those that need an agent wait, an ESXi repoint or a running job drained as a child
//     MigrateMachine each, at most Window at once (each waits up to WaitForRunningJob, or
//     after a drain what is left of it, for a job running on its machine to end); every
//     BatchesPerRun batches' worth of machines the transfer continues as new (transfer_runs.go);
//  5. repoint the rack: its own worker registers with the target and swaps its region
//     endpoints at once, while DHCP, TFTP and HTTP keep serving from its cache;
//  6. remove the rack from the source without force: the network that moved with it and its
//     pods are dropped there first, so the ordinary delete finds nothing that needs force;
//  7. release the rack's queued operations on the target and end its pause there.
//
// A failure before the repoint runs the undos of steps 2 and 3 in reverse, on a context
// disconnected from the workflow's. Machines are not part of that undo: each child migration
// commits or compensates on its own, so a failed or cancelled machine step stops starting new
// children, waits for those running, and fails the transfer, leaving the machines that
// already moved live on the target (the rack keeps serving them from the source, which keeps
// its network; run the transfer again to move the rest: machines already moved are no longer
// listed). Once the repoint succeeded the rack belongs to the target, so nothing is undone
// after it: the last two steps retry for up to an hour and a failure is reported.
func TransferRack(ctx workflow.Context, in TransferRackInput) (TransferRackResult, error) {
	t := &rackTransfer{in: in}
	if err := workflow.SetQueryHandlerWithOptions(ctx, ProgressQuery, t.query, workflow.QueryHandlerOptions{Description: progressDescription}); err != nil {
		return TransferRackResult{}, fmt.Errorf("register progress query: %w", err)
	}
	reportDetails(ctx, t.query)
	t.promise = keepsPromise(ctx)
	t.opts = optionsFor(t.promise)
	t.comps.Retrying = t.promise
	t.comps.OnError = func(_ string, err error) { t.progress.Errors = append(t.progress.Errors, err.Error()) }
	t.comps.SetPhase = func(ctx workflow.Context, phase string) {
		if err := t.setPhase(ctx, phase); err != nil {
			t.progress.Errors = append(t.progress.Errors, err.Error())
		}
	}
	if workflow.GetVersion(ctx, transferCompensationUpdateChange, workflow.DefaultVersion, 1) >= 1 {
		t.comps.OnOperator = func(note string) { t.progress.Operator = append(t.progress.Operator, note) }
		if err := t.comps.RegisterUpdate(ctx); err != nil {
			return TransferRackResult{}, fmt.Errorf("register compensation update: %w", err)
		}
	}
	if err := t.ctl.register(ctx, in.SourceRegion, TransferRackID(in.Rack), in.Window); err != nil {
		return TransferRackResult{}, err
	}
	if err := in.check(capsWindow(ctx, in.Window), checkJobWait(ctx, in.WaitForRunningJob)); err != nil {
		return t.fail(ctx, PhaseValidating, err)
	}
	if err := checkOwnID(ctx, "the transfer of rack "+in.Rack, TransferRackID(in.Rack)); err != nil {
		// A later run's too: its first activity is not FindRackLeftovers, which checks the first run's.
		return t.fail(ctx, PhaseValidating, err)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, RackUuidKey.ValueSet(in.Rack), SourceRegionKey.ValueSet(in.SourceRegion), TargetRegionKey.ValueSet(in.TargetRegion)); err != nil {
		return TransferRackResult{}, fmt.Errorf("upsert search attributes: %w", err)
	}
	if c := in.Continuation; c != nil {
		if err := t.resume(ctx, c); err != nil {
			return t.fail(ctx, PhaseMigratingMachines, err)
		}
	} else if err := t.recoverLeftover(ctx); err != nil {
		return t.fail(ctx, PhaseRecovering, err)
	}
	steps := []step{
		{phase: PhaseValidating, do: t.validate},
		{phase: PhasePausingRack, do: t.pause, undoName: "unpause-rack-on-source", undo: t.unpause},
	}
	if workflow.GetVersion(ctx, drainChange, workflow.DefaultVersion, 1) >= 1 {
		steps = append(steps, step{phase: PhaseDrainingJobs, do: t.drain})
	}
	steps = append(steps,
		step{phase: PhaseCopyingNetwork, do: t.copy, undoName: "delete-copy-on-target", undo: t.deleteCopy},
		step{phase: PhaseMigratingMachines, do: t.migrateMachines},
		step{phase: PhaseRepointingRack, do: t.repoint, commits: true},
		step{phase: PhaseRemovingRack, do: t.handOver},
		step{phase: PhaseReleasing, do: t.release},
	)
	resuming := in.Continuation != nil
	for _, s := range steps {
		if resuming = resuming && s.phase != PhaseMigratingMachines; resuming {
			// An earlier run took this step: only its undo is still due.
			if s.undo != nil {
				t.comps.Add(s.undoName, s.undo)
			}
			continue
		}
		if cancelledBetweenSteps(ctx, t.promise) {
			return t.fail(ctx, s.phase, temporal.NewCanceledError())
		}
		if err := t.setPhase(ctx, s.phase); err != nil {
			return t.fail(ctx, s.phase, err)
		}
		if s.undo != nil {
			t.comps.Add(s.undoName, s.undo)
		}
		if err := s.do(ctx); err != nil {
			return t.fail(ctx, s.phase, err)
		}
		if t.nextAfter != "" {
			return t.continueAsNew(ctx)
		}
		if s.commits {
			t.comps.Commit()
			t.repointed = true
			if t.promise {
				// The rack serves from the target: the hand-over and the release of its
				// queued operations finish whatever happens, and the transfer completes.
				var cancel workflow.CancelFunc
				ctx, cancel = workflow.NewDisconnectedContext(ctx)
				defer cancel()
			}
		}
	}
	err := t.setPhase(ctx, PhaseCompleted)
	t.ctl.finish(ctx)
	return t.result, err
}

// transferCompensationUpdateChange is the GetVersion change ID of the compensation Update on
// TransferRack, the operator's way out of a stuck undo (as on MigrateMachine): runs recorded
// before it have no handler for it.
const transferCompensationUpdateChange = "transfer-compensation-update"

// transferWindowCapChange is the GetVersion change ID of the refusal of a window above
// MaxBulkWindow: runs recorded before it moved at any window.
const transferWindowCapChange = "transfer-window-cap"

// capsWindow reports whether this run refuses a window above MaxBulkWindow. GetVersion is
// asked only of such a window, so other runs carry no marker.
func capsWindow(ctx workflow.Context, window int) bool {
	return window > MaxBulkWindow && workflow.GetVersion(ctx, transferWindowCapChange, workflow.DefaultVersion, 1) >= 1
}

// check refuses an invalid input, with the problems found by the workflow's own checks;
// capWindow refuses a window above MaxBulkWindow too.
func (in TransferRackInput) check(capWindow bool, problems ...error) error {
	if in.SourceRegion == "" {
		problems = append(problems, errors.New("SourceRegion is empty"))
	}
	if in.TargetRegion == "" {
		problems = append(problems, errors.New("TargetRegion is empty"))
	}
	if in.SourceRegion != "" && in.SourceRegion == in.TargetRegion {
		problems = append(problems, fmt.Errorf("SourceRegion and TargetRegion are both %q", in.SourceRegion))
	}
	if id, err := uuid.Parse(in.Rack); err != nil || id.String() != in.Rack {
		problems = append(problems, fmt.Errorf("Rack %q is not a lower-case UUID", in.Rack))
	}
	if in.Window < 0 || (capWindow && in.Window > MaxBulkWindow) {
		problems = append(problems, fmt.Errorf("Window %d is not between 1 and %d (0: the default)", in.Window, MaxBulkWindow))
	}
	if in.WaitForRunningJob < 0 {
		problems = append(problems, fmt.Errorf("WaitForRunningJob %s is negative", in.WaitForRunningJob))
	}
	if err := checkBatchSize(in.MachinesPerBatch); err != nil {
		problems = append(problems, err)
	}
	if in.BatchesPerRun < 0 {
		problems = append(problems, fmt.Errorf("BatchesPerRun %d is negative", in.BatchesPerRun))
	}
	if err := errors.Join(problems...); err != nil {
		return temporal.NewNonRetryableApplicationError("invalid transfer input: "+err.Error(), ErrTypeInvalidInput, nil)
	}
	return nil
}

// rackTransfer is the state of one TransferRack run.
type rackTransfer struct {
	in        TransferRackInput
	plan      activities.TransferPlan
	result    TransferRackResult
	progress  TransferProgress
	comps     Compensations
	repointed bool
	promise   bool // keepsPromise: the paths of promiseChange
	opts      stepOptions
	ctl       moveControls
	// after is the last machine, in UUID order, an earlier run migrated ("" in the first);
	// nextAfter, once set, the last this run migrated, with more left for the next run.
	after, nextAfter string
	// laterRuns counts the machines left to runs after this one.
	laterRuns int
	// jobsDeadline ends the wait for running jobs of a transfer that drained them (drain):
	// the children wait only for what is left of it. Zero: each child waits
	// WaitForRunningJob.
	jobsDeadline time.Time
}

func (t *rackTransfer) input() activities.TransferInput {
	return activities.TransferInput{SourceRegion: t.in.SourceRegion, TargetRegion: t.in.TargetRegion, Rack: t.in.Rack, Grant: t.in.Grant}
}

func (t *rackTransfer) source() activities.RackRef {
	return activities.RackRef{Region: t.in.SourceRegion, Rack: t.in.Rack}
}

func (t *rackTransfer) target() activities.RackRef {
	return activities.RackRef{Region: t.in.TargetRegion, Rack: t.in.Rack}
}

func (t *rackTransfer) validate(ctx workflow.Context) error {
	if err := call(ctx, regionCallOptions, acts.ValidateTransfer, t.input(), &t.plan); err != nil {
		return err
	}
	t.result.RackName, t.result.Machines = t.plan.RackName, len(t.plan.Machines)
	t.progress.MachinesTotal = len(t.plan.Machines)
	return upsertStartedBy(ctx, t.plan.StartedBy)
}

func (t *rackTransfer) pause(ctx workflow.Context) error {
	return call(ctx, awaitedOnCancel(ctx, t.promise, holdAwaitedChange, regionCallOptions), acts.PauseRack, t.source(), nil)
}

func (t *rackTransfer) unpause(ctx workflow.Context) error {
	return call(ctx, t.opts.undo, acts.UnpauseRack, t.source(), nil)
}

// copy has the rack push its leases to the source first, so the copy carries the latest.
func (t *rackTransfer) copy(ctx workflow.Context) error {
	rackCtx := workflow.WithTaskQueue(ctx, rackacts.TaskQueue(t.in.Rack))
	if err := call(rackCtx, rackCallOptions, rackActs.ExportLeases, nil, nil); err != nil {
		return err
	}
	return call(ctx, t.opts.copy, acts.CopyRack, t.input(), &t.result.Copied)
}

func (t *rackTransfer) deleteCopy(ctx workflow.Context) error {
	return call(ctx, t.opts.undo, acts.UndoRackCopy, t.target(), nil)
}

// migrateMachines migrates the plan's machines, each with a child MigrateMachine (migrateEach).
//
// Runs that take the batched path (batchChange) first move the machines in batches
// (migrateBatches); the machines the batches leave to it then take this path.
//
// Runs that take the machine phase in runs (transferRunsChange) migrate at most BatchesPerRun
// batches' worth of machines each, then continue as new (migrateThisRun).
func (t *rackTransfer) migrateMachines(ctx workflow.Context) error {
	machines := t.plan.Machines
	if workflow.GetVersion(ctx, batchChange, workflow.DefaultVersion, 1) >= 1 {
		if workflow.GetVersion(ctx, transferRunsChange, workflow.DefaultVersion, 1) >= 1 {
			return t.migrateThisRun(ctx)
		}
		var err error
		if machines, err = t.migrateBatches(ctx, machines); err != nil || len(machines) == 0 {
			return err
		}
	}
	return t.migrateEach(ctx, machines)
}

// migrateEach runs a child MigrateMachine per machine, at most Window at once. After the
// first failure it starts no more children and waits for the running ones.
func (t *rackTransfer) migrateEach(ctx workflow.Context, machines []string) error {
	window := t.in.Window
	if window == 0 {
		window = DefaultTransferWindow
	}
	started := 0
	var failures []string
	runWindowed(ctx, machines, &t.ctl, func() int { return t.ctl.windowOr(window) }, func() bool { return len(failures) == 0 },
		func(ctx workflow.Context, machine string) workflow.Future {
			started++
			t.progress.MachinesRunning++
			return startMigrateMachine(ctx, MigrateMachineInput{
				SourceRegion: t.in.SourceRegion, TargetRegion: t.in.TargetRegion, Machine: machine, WaitForRunningJob: t.jobWait(ctx), Grant: t.in.Grant,
				MoveRun: moveRunOf(ctx),
			})
		},
		func(machine string, f workflow.Future) {
			t.progress.MachinesRunning--
			err := f.Get(ctx, nil)
			if skip, ok := skippedChild(machine, err); ok {
				t.progress.MachinesSkipped++
				failures = append(failures, fmt.Sprintf("machine %s: %s", machine, skip.Reason))
				return
			}
			if err != nil && !(t.promise && t.alreadyOnTarget(err)) {
				t.progress.MachinesFailed++
				failures = append(failures, fmt.Sprintf("machine %s: %v", machine, err))
				return
			}
			t.progress.MachinesDone++
		})
	if ctx.Err() != nil {
		return temporal.NewCanceledError()
	}
	if len(failures) > 0 {
		t.progress.Errors = append(t.progress.Errors, failures...)
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%d of %d machines failed to migrate, %d skipped (%d moved, %d not started): %s", t.progress.MachinesFailed, t.progress.MachinesTotal,
				t.progress.MachinesSkipped, t.progress.MachinesDone, len(machines)-started+t.laterRuns, strings.Join(failures, "; ")),
			ErrTypeMachinesFailed, nil)
	}
	return nil
}

// alreadyOnTarget reports a child that found its machine already migrated to this
// transfer's target (migrated directly meanwhile): the machine is where the transfer wants it.
func (t *rackTransfer) alreadyOnTarget(err error) bool {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrTypeAlreadyMigrated || !appErr.HasDetails() {
		return false
	}
	var to string
	return appErr.Details(&to) == nil && to == t.plan.TargetURL
}

// repoint moves the rack to the target. When the rack's activity fails (or is cancelled,
// and was waited for) the rack may have moved all the same (its answer was lost): its own
// report decides, since undoing the copy on the target would pull the network from under a
// rack that now serves from there. When the rack cannot say, nothing is undone.
func (t *rackTransfer) repoint(ctx workflow.Context) error {
	rackCtx := workflow.WithTaskQueue(ctx, rackacts.TaskQueue(t.in.Rack))
	in := rackacts.SwapRegionEndpointsInput{URLs: t.plan.TargetEndpoints, Secret: t.in.TargetRegion}
	err := call(rackCtx, t.opts.rackSwap, rackActs.SwapRegionEndpoints, in, nil)
	if err == nil {
		return nil
	}
	if t.promise {
		// The state is asked for after a cancel too.
		dctx, cancel := workflow.NewDisconnectedContext(rackCtx)
		defer cancel()
		rackCtx = dctx
	}
	var state rackacts.State
	serr := call(rackCtx, rackCallOptions, rackActs.ReportState, nil, &state)
	switch {
	case serr != nil && t.promise:
		t.comps.Commit()
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("repointing rack %s failed (%v) and its state could not be read (%v): it may serve from %s or %s; nothing was undone, check the rack and run the transfer again or undo it by hand",
				t.in.Rack, err, serr, t.in.SourceRegion, t.in.TargetRegion),
			ErrRackStateUnknown, err)
	case serr != nil || state.Region != t.in.TargetRegion:
		return err
	}
	return nil
}

func (t *rackTransfer) handOver(ctx workflow.Context) error {
	return call(ctx, t.opts.finish, acts.HandOverRack, t.source(), nil)
}

func (t *rackTransfer) release(ctx workflow.Context) error {
	var res activities.ReleaseResult
	if err := call(ctx, t.opts.finish, acts.ReleaseRack, t.input(), &res); err != nil {
		return err
	}
	t.result.Released = res.Released
	return nil
}

func (t *rackTransfer) setPhase(ctx workflow.Context, phase string) error {
	t.progress.Phase = phase
	return upsertPhase(ctx, phase)
}

// fail records err, runs the pending undos and ends the transfer as failed (or cancelled).
func (t *rackTransfer) fail(ctx workflow.Context, phase string, err error) (TransferRackResult, error) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	cancelled := temporal.IsCanceledError(err) || errors.Is(ctx.Err(), workflow.ErrCanceled)
	if temporal.IsCanceledError(err) {
		err = temporal.NewCanceledError() // a step waited for on cancel wraps it
	}
	t.progress.Errors = append(t.progress.Errors, fmt.Sprintf("%s: %v", phase, err))
	if t.comps.Len() > 0 {
		if compErr := t.comps.Run(ctx); compErr != nil {
			err = temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s failed: %v; then %v", phase, err, compErr), ErrTypeCompensationFailed, err)
			cancelled = false
		}
	}
	if t.repointed && !cancelled {
		err = temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("rack %s serves from %s now, but %s failed: %v", t.in.Rack, t.in.TargetRegion, phase, err), ErrTypeAfterActivation, err)
	}
	final := PhaseFailed
	if cancelled {
		final = PhaseCanceled
	}
	if perr := t.setPhase(dctx, final); perr != nil {
		err = errors.Join(err, perr)
	}
	t.ctl.finish(dctx)
	return t.result, err
}

func (t *rackTransfer) query() (TransferProgress, error) {
	p := t.progress
	p.Errors = append([]string(nil), t.progress.Errors...)
	p.Operator = append([]string(nil), t.progress.Operator...)
	p.Paused, p.Window = t.ctl.state.Paused, t.ctl.current().Window
	return p, nil
}
