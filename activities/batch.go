package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities/heartbeat"
	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// The batched path of a rack transfer or a bulk run (workflows.MigrateMachineBatch): one
// activity moves a batch of machines, each through the steps of MigrateMachine (quiesce, copy,
// finalize, activate) with its own undos, so Temporal records one activity per batch instead
// of a child workflow of about fifty events per machine. Machines whose move needs more than
// region calls (an agent to wait for, an ESXi host to repoint, a running job to drain) are
// left untouched and reported, for the per-machine path.

// Bounds of the batched path.
const (
	// MaxBatchMachines is the largest batch MigrateBatch takes: its input and result stay
	// small (UUIDs and short messages), and a batch's machines fit in a search attribute.
	MaxBatchMachines = 100
	// DefaultBatchParallelism is how many machines of a batch move at once when the input
	// says nothing: enough to keep both regions busy, few enough that their connection
	// limits never refuse the worker.
	DefaultBatchParallelism = 8
	// batchCallTimeout bounds one region call of the batched path; batchCallAttempts is how
	// often a call that failed for a reason retrying can fix is tried; an undo is tried
	// batchUndoAttempts times before the machine is reported stuck.
	batchCallTimeout  = time.Minute
	batchCallAttempts = 5
	batchUndoAttempts = 10
)

// ErrTypeBatchUndoFailed is the failure type of a machine of a batch whose undo kept failing:
// its message says which undos are left and where the machine is.
const ErrTypeBatchUndoFailed = "BatchUndoFailed"

// BatchInput names the machines of one batch and the move.
type BatchInput struct {
	SourceRegion string
	TargetRegion string
	// Migration is the batch workflow's ID: it holds each machine while it moves (Meta.migrating
	// on the source, the inactive copy on the target), as a MigrateMachine's ID does.
	Migration string
	Machines  []string // UUIDs, at most MaxBatchMachines
	// Parallelism is how many of the machines move at once; 0 means DefaultBatchParallelism.
	Parallelism int `json:",omitempty"`
	// Grant is the parent's rack or bulk grant; the source verifies it for each machine.
	Grant string `json:",omitempty"`
	// Move is the root workflow of the move the batch is part of, MoveRun the first run of its
	// chain (api.GrantCheck).
	Move    string `json:",omitempty"`
	MoveRun string `json:",omitempty"`
	// Settle moves nothing forward: each machine is finished if it was finalized to the
	// target, undone if the batch holds it, and reported not started otherwise. A workflow
	// settles a batch whose attempts ran out or that was cancelled, retrying until every
	// machine it touched is on exactly one region however long a region is down: a region
	// that does not answer fails the attempt, a retry goes on from where it stopped. Reason
	// says why, for the machines' failures.
	Settle bool   `json:",omitempty"`
	Reason string `json:",omitempty"`
}

// BatchResult says what happened to each machine of a batch, by UUID.
type BatchResult struct {
	Moved []string
	// PerMachine were left untouched: their move needs the per-machine path (agent, ESXi host
	// or running job).
	PerMachine []string `json:",omitempty"`
	Failed     []BatchFailure
}

// BatchFailure is a machine of a batch that did not move.
type BatchFailure struct {
	Machine string
	Type    string // the error type (ErrType…), "" for an error without one
	Error   string
	// Undone: nothing of the move is left (never started, or every undo ran); false: the
	// error says where the machine is and which undos are left.
	Undone bool
}

// MigrateBatch moves each machine of the batch from source to target, Parallelism at a
// time, or settles them (BatchInput.Settle). Every machine is moved or undone on its own: one
// machine's failure undoes that machine's steps only. A step that changed a region is never
// cut short: the calls run on a context the activity's cancellation does not reach, and a
// cancel the workflow asked for stops each machine at its next step boundary, before
// activation undoing what it did, after it finishing. Any other end of the attempt (its worker
// stops, it timed out, was paused or reset: the server then gives the machines to the next
// attempt) also stops each machine at its next step boundary, but leaves it there and fails
// the attempt: run again (a retry, also after a worker crash), the batch resumes every machine
// from where it is, finishes those an earlier attempt left finalized and reports those it
// moved as moved.
func (a *Activities) MigrateBatch(ctx context.Context, in BatchInput) (BatchResult, error) {
	if in.Migration == "" || len(in.Machines) == 0 || len(in.Machines) > MaxBatchMachines || in.Parallelism < 0 {
		return BatchResult{}, nonRetryable(ErrTypeInvalidBatch, "a batch needs its migration, 1 to %d machines and a parallelism not negative (got %q, %d, %d)",
			MaxBatchMachines, in.Migration, len(in.Machines), in.Parallelism)
	}
	parallelism := in.Parallelism
	if parallelism == 0 {
		parallelism = DefaultBatchParallelism
	}
	if in.SourceRegion == in.TargetRegion {
		return BatchResult{}, nonRetryable(ErrTypeRegionMismatch, "source and target region are both %q", in.SourceRegion)
	}
	b := &batch{a: a, in: in}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		b.resumes = info.Attempt > 1
		b.workerStop = activity.GetWorkerStopChannel(ctx)
		// Every region step of this attempt names it, so a step still in flight when the
		// server gives the machines to a newer attempt is refused once that one acted.
		ctx = client.ForAttempt(ctx, api.Attempt{Started: info.StartedTime, Number: info.Attempt})
	}
	var srcInfo, dstInfo api.Info
	var err error
	if b.src, srcInfo, err = a.checkedRegion(ctx, in.SourceRegion); err != nil {
		return BatchResult{}, err
	}
	if b.dst, dstInfo, err = a.checkedRegion(ctx, in.TargetRegion); err != nil {
		return BatchResult{}, err
	}
	b.srcURL, b.dstURL = srcInfo.URL, dstInfo.URL
	outcomes := make([]batchOutcome, len(in.Machines))
	_ = heartbeat.While(ctx, func(ctx context.Context) error {
		sem := make(chan struct{}, parallelism)
		var wg sync.WaitGroup
		for i, id := range in.Machines {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if in.Settle {
					outcomes[i] = b.settle(ctx, id)
				} else {
					outcomes[i] = b.move(ctx, id)
				}
			}()
		}
		wg.Wait()
		return nil
	})
	var res BatchResult
	var interrupted []string
	for i, o := range outcomes {
		id := in.Machines[i]
		switch {
		case o.interrupted:
			interrupted = append(interrupted, fmt.Sprintf("machine %s: %v", id, o.err))
		case o.perMachine:
			res.PerMachine = append(res.PerMachine, id)
		case o.err != nil:
			res.Failed = append(res.Failed, BatchFailure{Machine: id, Type: errorType(o.err), Error: o.err.Error(), Undone: o.undone})
		default:
			res.Moved = append(res.Moved, id)
		}
	}
	if len(interrupted) > 0 {
		// Retryable: the next attempt, on a worker that runs, resumes them.
		return BatchResult{}, fmt.Errorf("%d machines of the batch are not finished, a retry resumes them (first: %s)", len(interrupted), interrupted[0])
	}
	return res, nil
}

// ErrTypeInvalidBatch is the error type of a batch input MigrateBatch refuses.
const ErrTypeInvalidBatch = "InvalidBatch"

type batch struct {
	a              *Activities
	in             BatchInput
	src, dst       Region
	srcURL, dstURL string
	resumes        bool // a retried attempt: a machine finalized to the target is this batch's
	// workerStop is closed when the worker is stopping: each machine stops at its next step
	// boundary, where it is, for a retry to resume; nothing is undone.
	workerStop <-chan struct{}
}

// errWorkerStopping is why a machine stops where it is when its worker stops.
var errWorkerStopping = errors.New("the worker is stopping")

// interruption says whether a machine must stop where it is at a step boundary, and why: the
// worker stops, or the attempt ended for another reason than a cancel the workflow asked for
// (StartToClose or heartbeat timeout, pause, reset), so the next attempt owns the machine and
// undoing it here would undo that attempt's work. nil: go on, or handle ctx's cancel.
func (b *batch) interruption(ctx context.Context) error {
	select {
	case <-b.workerStop:
		return errWorkerStopping
	default:
	}
	if ctx.Err() == nil || canceledByWorkflow(ctx) {
		return nil
	}
	return fmt.Errorf("this attempt ended (%w): the next attempt resumes the machine", context.Cause(ctx))
}

// canceledByWorkflow reports a ctx cancelled because the workflow cancelled the activity (the
// SDK's cause), or cancelled by a direct caller outside an activity.
func canceledByWorkflow(ctx context.Context) bool {
	var canceled *temporal.CanceledError
	cause := context.Cause(ctx)
	return errors.As(cause, &canceled) || (cause == context.Canceled && !activity.IsActivity(ctx))
}

// batchOutcome is one machine's: moved (err nil), per-machine, failed (undone or not), or
// interrupted (err says why): left where it is for the next attempt.
type batchOutcome struct {
	perMachine  bool
	interrupted bool
	err         error
	undone      bool
}

// machineMove is one machine's move in a batch, with the undos of the steps it took.
type machineMove struct {
	*batch
	id        string
	startedBy string
	undos     []batchUndo
	// finalizing is set once FinalizeMigration was asked for: from then on the source may
	// redirect the machine's agent to the target, and an undone copy redirects it back.
	finalizing bool
}

type batchUndo struct {
	name string
	do   func(context.Context) error
}

func (b *batch) ref(region, id string) MachineRef {
	return MachineRef{Region: region, Machine: id, Migration: b.in.Migration}
}

// move runs one machine's steps; region calls run on work, which ctx's cancellation does not
// reach.
func (b *batch) move(ctx context.Context, id string) batchOutcome {
	work := context.WithoutCancel(ctx)
	if err := b.interruption(ctx); err != nil {
		return batchOutcome{interrupted: true, err: err}
	}
	switch {
	case ctx.Err() != nil:
		return batchOutcome{err: temporal.NewCanceledError("the batch was canceled before machine " + id + " started"), undone: true}
	}
	mv := &machineMove{batch: b, id: id}
	done, perMachine, err := mv.validate(work)
	switch {
	case err != nil:
		return batchOutcome{err: err, undone: true}
	case perMachine:
		return batchOutcome{perMachine: true}
	case done:
		return batchOutcome{}
	}
	steps := []struct {
		name string
		do   func(context.Context) error
		undo batchUndo
	}{
		{"quiesce", mv.quiesce, batchUndo{"unquiesce", mv.unquiesce}},
		{"copy", mv.copy, batchUndo{"delete-imported-copy", mv.undoCopy}},
		{"finalize", mv.finalize, batchUndo{"restore-migration", mv.restore}},
	}
	for _, s := range steps {
		if err := b.interruption(ctx); err != nil {
			return batchOutcome{interrupted: true, err: err}
		}
		if ctx.Err() != nil {
			return mv.fail(work, fmt.Errorf("machine %s: the batch was canceled before %s: %w", id, s.name, temporal.NewCanceledError()))
		}
		mv.undos = append(mv.undos, s.undo)
		if err := retry(work, batchCallAttempts, s.do); err != nil {
			return mv.fail(work, fmt.Errorf("machine %s: %s: %w", id, s.name, err))
		}
	}
	if err := retry(work, batchCallAttempts, mv.activate); err != nil {
		// The activation may have taken effect all the same: the target decides.
		active, cerr := mv.activeOnTarget(work)
		if cerr != nil {
			return batchOutcome{err: nonRetryable(ErrTypeCompensationFailed,
				"machine %s: activating it on %s failed (%v) and its state there could not be read (%v): nothing was undone, the source keeps its locked stub; activate the target or restore the source by hand",
				id, b.in.TargetRegion, err, cerr)}
		}
		if !active {
			return mv.fail(work, fmt.Errorf("machine %s: activate: %w", id, err))
		}
	}
	return batchOutcome{}
}

// settle finishes or undoes one machine, as its regions say it is (BatchInput.Settle). A
// region that does not answer leaves the machine interrupted, for the next attempt.
func (b *batch) settle(ctx context.Context, id string) batchOutcome {
	if err := b.interruption(ctx); err != nil {
		return batchOutcome{interrupted: true, err: err}
	}
	work := context.WithoutCancel(ctx)
	mv := &machineMove{batch: b, id: id}
	var m api.Machine
	err := retry(work, batchCallAttempts, func(ctx context.Context) error {
		var err error
		_, m, err = mv.a.machine(ctx, mv.ref(mv.in.SourceRegion, id))
		return err
	})
	switch {
	case isNotFound(err):
		return batchOutcome{err: nonRetryable(ErrTypeMachineNotFound, "machine %s not found on region %s", id, mv.in.SourceRegion)}
	case err != nil:
		return batchOutcome{interrupted: true, err: err}
	case isRedirectStub(m) && m.Meta[api.MetaRedirectEndpoint] != mv.dstURL:
		return batchOutcome{err: nonRetryable(ErrTypeAlreadyMigrated, "machine %s on %s is a stub already migrated to %s", id, mv.in.SourceRegion, m.Meta[api.MetaRedirectEndpoint]), undone: true}
	case isRedirectStub(m):
		return mv.finishFinalized(work)
	case m.Meta[api.MetaMigrating] == mv.in.Migration:
		mv.undos = []batchUndo{{"unquiesce", mv.unquiesce}, {"delete-imported-copy", mv.undoCopy}}
		return mv.fail(work, fmt.Errorf("machine %s: %s", id, mv.in.Reason))
	}
	return batchOutcome{err: fmt.Errorf("machine %s was not moved: %s", id, mv.in.Reason), undone: true}
}

// finishFinalized activates the target's copy of a machine the source redirects there: past
// the commit point the move finishes. The target refuses a copy another migration holds.
func (mv *machineMove) finishFinalized(ctx context.Context) batchOutcome {
	active, err := mv.activeOnTarget(ctx)
	if err == nil && !active {
		err = retry(ctx, batchCallAttempts, mv.activate)
	}
	switch {
	case err == nil:
		return batchOutcome{}
	case isNonRetryable(err):
		return batchOutcome{err: fmt.Errorf("machine %s: activate: %w", mv.id, err)}
	}
	return batchOutcome{interrupted: true, err: err}
}

// ErrTypeCompensationFailed is the failure type of a machine whose undo could not finish or
// whose activation could not be confirmed either way (as MigrateMachine's).
const ErrTypeCompensationFailed = "CompensationFailed"

// validate reads the machine on the source and decides: done (an earlier attempt, or another
// move, already put it live on the target), perMachine (left untouched), or go on. A machine
// that cannot move is an error and untouched.
func (mv *machineMove) validate(ctx context.Context) (done, perMachine bool, err error) {
	var m api.Machine
	err = retry(ctx, batchCallAttempts, func(ctx context.Context) error {
		var err error
		_, m, err = mv.a.machine(ctx, mv.ref(mv.in.SourceRegion, mv.id))
		return err
	})
	switch {
	case isNotFound(err):
		return false, false, nonRetryable(ErrTypeMachineNotFound, "machine %s not found on region %s", mv.id, mv.in.SourceRegion)
	case err != nil:
		return false, false, err
	case isRedirectStub(m):
		return mv.finishMoved(ctx, m)
	case repointMethod(m) != RepointNone, m.Meta[api.MetaMigrating] != "" && m.Meta[api.MetaMigrating] != mv.in.Migration:
		// An agent or host to repoint, or held by another migration, which the per-machine
		// path names.
		return false, true, nil
	}
	if m.CurrentJob != "" {
		var job api.Job
		err := retry(ctx, batchCallAttempts, func(ctx context.Context) error {
			var err error
			job, err = mv.src.GetJob(ctx, m.CurrentJob)
			if isNotFound(err) {
				return nil
			}
			return classify(err, "get current job %s of machine %s on %s", m.CurrentJob, mv.id, mv.in.SourceRegion)
		})
		if err != nil {
			return false, false, err
		}
		if job.State == api.JobRunning {
			return false, true, nil
		}
	}
	if err := checkMigratable(m, ValidateInput{Migration: mv.in.Migration, SourceRegion: mv.in.SourceRegion}); err != nil {
		return false, false, err
	}
	check := api.GrantCheck{Grant: mv.in.Grant, TargetRegion: mv.in.TargetRegion, Kind: api.GrantMachine, Key: mv.id, Migration: mv.in.Migration, Move: mv.in.Move, MoveRun: mv.in.MoveRun}
	err = retry(ctx, batchCallAttempts, func(ctx context.Context) error {
		var err error
		mv.startedBy, err = verifyGrant(ctx, mv.src, mv.in.SourceRegion, check)
		return err
	})
	return false, false, err
}

// finishMoved handles a machine that is already a stub on the source. Redirecting to this
// target with its copy active there, it is moved. With its copy still inactive, in an attempt
// after the first, this batch finalized it before its worker died: it is activated; in the
// first attempt it is another migration's, left to the per-machine path, which names it.
// Redirecting elsewhere it moved elsewhere: AlreadyMigrated.
func (mv *machineMove) finishMoved(ctx context.Context, m api.Machine) (done, perMachine bool, err error) {
	to := m.Meta[api.MetaRedirectEndpoint]
	if to != mv.dstURL {
		return false, false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("machine %s (%s) on %s is a stub already migrated to %s", m.Name, m.Uuid, mv.in.SourceRegion, to), ErrTypeAlreadyMigrated, nil, to)
	}
	if active, err := mv.activeOnTarget(ctx); err != nil || active {
		return active, false, err
	}
	if !mv.resumes {
		return false, true, nil // another migration's, not activated yet: it names itself there
	}
	return true, false, retry(ctx, batchCallAttempts, mv.activate)
}

// activeOnTarget reports whether the machine's copy on the target is active.
func (mv *machineMove) activeOnTarget(ctx context.Context) (active bool, err error) {
	err = retry(ctx, batchCallAttempts, func(ctx context.Context) error {
		active, err = mv.a.IsActive(ctx, mv.ref(mv.in.TargetRegion, mv.id))
		return err
	})
	return active, err
}

func (mv *machineMove) quiesce(ctx context.Context) error {
	return mv.a.Quiesce(ctx, mv.ref(mv.in.SourceRegion, mv.id))
}

func (mv *machineMove) unquiesce(ctx context.Context) error {
	return mv.a.Unquiesce(ctx, mv.ref(mv.in.SourceRegion, mv.id))
}

func (mv *machineMove) copy(ctx context.Context) error {
	_, err := mv.a.exportImport(ctx, CopyInput{SourceRegion: mv.in.SourceRegion, TargetRegion: mv.in.TargetRegion, Machine: mv.id, Migration: mv.in.Migration, StartedBy: mv.startedBy})
	return err
}

func (mv *machineMove) undoCopy(ctx context.Context) error {
	return mv.a.UndoCopy(ctx, UndoCopyInput{Source: mv.ref(mv.in.SourceRegion, mv.id), Target: mv.ref(mv.in.TargetRegion, mv.id), RedirectBack: mv.finalizing})
}

func (mv *machineMove) finalize(ctx context.Context) error {
	mv.finalizing = true
	return mv.a.FinalizeMigration(ctx, FinalizeInput{MachineRef: mv.ref(mv.in.SourceRegion, mv.id), RedirectEndpoint: mv.dstURL})
}

func (mv *machineMove) restore(ctx context.Context) error {
	return mv.a.RestoreMigration(ctx, mv.ref(mv.in.SourceRegion, mv.id))
}

func (mv *machineMove) activate(ctx context.Context) error {
	return mv.a.Activate(ctx, mv.ref(mv.in.TargetRegion, mv.id))
}

// fail runs the machine's undos in reverse and returns its outcome. An undo that refuses
// because the source lost the machine (LastCopy, MachineNotFound) stops the undos, and the
// target's copy is activated so the machine stays live on one region, as MigrateMachine does.
// A step or undo a region refused as this attempt's, older than one that acted on the machine
// (StaleAttempt), stops everything: the newer attempt owns the machine.
func (mv *machineMove) fail(ctx context.Context, cause error) batchOutcome {
	if hasType(cause, ErrTypeStaleAttempt) {
		return batchOutcome{interrupted: true, err: cause}
	}
	for i := len(mv.undos) - 1; i >= 0; i-- {
		u := mv.undos[i]
		err := retry(ctx, batchUndoAttempts, u.do)
		if err == nil {
			continue
		}
		if hasType(err, ErrTypeStaleAttempt) {
			return batchOutcome{interrupted: true, err: fmt.Errorf("%s: %w", u.name, err)}
		}
		if mv.in.Settle && !isNonRetryable(err) {
			// Settling never gives up: the next attempt runs the undos left.
			return batchOutcome{interrupted: true, err: fmt.Errorf("%s: %w", u.name, err)}
		}
		if hasType(err, ErrLastCopy, ErrTypeMachineNotFound) {
			if aerr := retry(ctx, batchUndoAttempts, mv.activate); aerr != nil {
				err = fmt.Errorf("%w; the machine is on neither region as far as this batch can tell: activating its copy on %s failed too: %v", err, mv.in.TargetRegion, aerr)
			} else {
				err = fmt.Errorf("%w; its copy on %s was activated instead: machine %s is active on %s, nothing more was undone", err, mv.in.TargetRegion, mv.id, mv.in.TargetRegion)
			}
			return batchOutcome{err: nonRetryable(ErrTypeCompensationFailed, "%v; then %s: %v", cause, u.name, err)}
		}
		left := make([]string, 0, i+1)
		for j := i; j >= 0; j-- {
			left = append(left, mv.undos[j].name)
		}
		return batchOutcome{err: nonRetryable(ErrTypeBatchUndoFailed, "%v; then %s failed: %v (undos left, in order: %s; the machine is held by %s)",
			cause, u.name, err, strings.Join(left, ", "), mv.in.Migration)}
	}
	return batchOutcome{err: cause, undone: true}
}

// retry runs op until it succeeds, fails for a reason retrying cannot fix, or has run
// attempts times, each call bounded by batchCallTimeout.
func retry(ctx context.Context, attempts int, op func(context.Context) error) error {
	bo := backoff.Backoff{Initial: 200 * time.Millisecond, Max: 5 * time.Second}
	for i := 1; ; i++ {
		callCtx, cancel := context.WithTimeout(ctx, batchCallTimeout)
		err := op(callCtx)
		cancel()
		if err == nil || i >= attempts || isNonRetryable(err) {
			return err
		}
		if err := backoff.Sleep(ctx, bo.Next()); err != nil {
			return err
		}
	}
}

// isNonRetryable reports an error retrying cannot fix: a non-retryable application error.
func isNonRetryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}

// hasType reports whether err is, or wraps, an application error of one of types.
func hasType(err error, types ...string) bool {
	return slices.Contains(types, errorType(err))
}

// errorType is the type of the application error err is or wraps, "" when none.
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}
