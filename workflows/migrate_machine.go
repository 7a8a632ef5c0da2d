package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/esxi"
)

// Phases of MigrateMachine, in the MigrationPhase search attribute and the progress query.
const (
	PhaseValidating     = "validating"
	PhaseWaitingForJob  = "waiting-for-job"
	PhaseMintingTicket  = "minting-ticket"
	PhaseQuiescing      = "quiescing"
	PhaseCopying        = "copying"
	PhaseFinalizing     = "finalizing"
	PhaseRepointing     = "repointing-agent"
	PhaseActivating     = "activating"
	PhaseDestroyingStub = "destroying-stub"
	PhaseCompleted      = "completed"
	PhaseFailed         = "failed"
	PhaseCanceled       = "canceled"
)

// Application error types raised by the workflow itself (activities raise theirs, see
// package activities).
const (
	ErrTypeInvalidInput       = "InvalidInput"
	ErrTypeJobRunning         = "JobRunning"
	ErrTypeCompensationFailed = "CompensationFailed"
	ErrTypeAfterActivation    = "FailedAfterActivation"
	// ErrTypeUpdateRefused: an Update's validator refused the request (a pause of a paused
	// run…); its message is the reason, for the operator.
	ErrTypeUpdateRefused = "UpdateRefused"
)

// DefaultAgentCheckInTimeout bounds the wait for a repointed agent when the input says nothing.
const DefaultAgentCheckInTimeout = 30 * time.Minute

const (
	jobPollInterval   = 30 * time.Second // re-check a running job this often while waiting
	agentPollInterval = 5 * time.Second
)

// The wait for a running job is bounded (boundedJobWaitChange), so its history stays far
// below Temporal's event limit: WaitForRunningJob is at most MaxWaitForRunningJob, and the
// re-checks space out to a tenth of the time waited so far, from jobPollInterval up to
// jobPollMaxInterval (some 460 checks in the longest wait).
const (
	MaxWaitForRunningJob = 72 * time.Hour
	jobPollMaxInterval   = 10 * time.Minute
	boundedJobWaitChange = "bounded-job-wait"
)

// boundsJobWait reports whether this run takes boundedJobWaitChange. GetVersion is asked
// only of a run that waits, or would wait longer than the bound.
func boundsJobWait(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, boundedJobWaitChange, workflow.DefaultVersion, 1) >= 1
}

// checkJobWait refuses a wait above MaxWaitForRunningJob in a run that bounds it.
func checkJobWait(ctx workflow.Context, wait time.Duration) error {
	if wait > MaxWaitForRunningJob && boundsJobWait(ctx) {
		return fmt.Errorf("WaitForRunningJob %s is above %s", wait, MaxWaitForRunningJob)
	}
	return nil
}

// jobPoll is how long to wait before the next look at a running job, waited so far.
func jobPoll(ctx workflow.Context, waited time.Duration) time.Duration {
	if !boundsJobWait(ctx) {
		return jobPollInterval
	}
	return min(max(jobPollInterval, waited/10), jobPollMaxInterval)
}

// MigrateMachineInput names what to migrate. Regions are names from the worker's regions
// file: inputs are stored in plain text in Temporal history, so they never carry credentials.
type MigrateMachineInput struct {
	SourceRegion string
	TargetRegion string
	Machine      string // UUID or "Field:value", e.g. "Name:birdy"
	// Ticket is a single-use import ticket the user minted on the target; empty: the copy
	// step mints one there itself, so no ticket enters workflow history.
	Ticket string
	// SkipMachineMigration only repoints the agent (the machine record already moved).
	SkipMachineMigration bool
	// SkipMachineDestroy keeps the locked stub on the source; nil means true, as in DRP.
	SkipMachineDestroy *bool
	// WaitForRunningJob is how long to wait for a running job to end before failing.
	WaitForRunningJob time.Duration
	// AgentCheckInTimeout bounds the wait for the agent at the target (0: the default).
	AgentCheckInTimeout time.Duration
	// Grant is the source region's authorisation of this move (region/api/grants.go): a
	// machine grant, or the rack or bulk grant of the parent transfer or bulk migration.
	// Validation refuses the move without one that covers it.
	Grant string `json:",omitempty"`
	// MoveRun is set by the parent transfer or bulk run: the first run of its chain
	// (moveRunOf), which the source checks an expired grant against. A migration run alone
	// ignores it.
	MoveRun string `json:",omitempty"`
}

// MigrateMachineResult describes a finished migration.
type MigrateMachineResult struct {
	MachineUuid    string
	MachineName    string
	TargetEndpoint string
	Jobs           int
	Profiles       int
	AgentRepointed bool
	StubDeleted    bool
	StartedBy      string `json:",omitempty"` // the user the grant was issued to
	// Operator records the operator requests on a stuck compensation (CompensationUpdate),
	// "; "-separated: when, who, what and why.
	Operator string `json:",omitempty"`
}

// Progress is the answer of the progress query.
type Progress struct {
	Phase      string
	StepsDone  int
	StepsTotal int
	Errors     []string
	// Pending names the undos still to run while compensating (the next one first).
	Pending []string `json:",omitempty"`
	// Operator lists the operator requests on a stuck compensation, as in the result.
	Operator []string `json:",omitempty"`
}

// acts names the activities; the workflow only uses its methods as activity references.
var acts *activities.Activities

// GetVersion change IDs: the ESXi repoint branch, and the look at the target before a failed
// activation is compensated.
const (
	esxiRepointChange     = "repoint-esxi"
	activationCheckChange = "check-target-before-compensating-activation"
)

// MigrateMachine moves a machine, its jobs and profiles from one region to another
// (steps: README.md "How a migration behaves"; invariants: ARCHITECTURE.md). Every step that changes a region pushes its undo first;
// on failure or cancellation the undos run in reverse, until activation commits the move.
// After activation the remaining steps run whatever happens (a cancel no longer reaches
// them) and the move is reported completed.
func MigrateMachine(ctx workflow.Context, in MigrateMachineInput) (MigrateMachineResult, error) {
	m := &migration{in: in, id: workflow.GetInfo(ctx).WorkflowExecution.ID, ticket: in.Ticket}
	m.progress.StepsTotal = 1
	if err := workflow.SetQueryHandlerWithOptions(ctx, ProgressQuery, m.query, workflow.QueryHandlerOptions{Description: progressDescription}); err != nil {
		return MigrateMachineResult{}, fmt.Errorf("register progress query: %w", err)
	}
	reportDetails(ctx, m.query)
	m.comps.OnError = func(_ string, err error) { m.progress.Errors = append(m.progress.Errors, err.Error()) }
	m.comps.OnOperator = func(note string) {
		m.progress.Operator = append(m.progress.Operator, note)
		m.result.Operator = strings.Join(m.progress.Operator, "; ")
	}
	m.comps.SetPhase = func(ctx workflow.Context, phase string) {
		if err := m.setPhase(ctx, phase); err != nil {
			m.progress.Errors = append(m.progress.Errors, err.Error())
		}
	}
	m.comps.Audit = m.auditDecision
	m.comps.Stops = func(err error) bool {
		return hasErrorType(err, activities.ErrLastCopy, activities.ErrTypeMachineNotFound)
	}
	if err := m.comps.RegisterUpdate(ctx); err != nil {
		return MigrateMachineResult{}, fmt.Errorf("register compensation update: %w", err)
	}
	m.promise = keepsPromise(ctx)
	m.comps.Retrying = m.promise
	m.opts = optionsFor(m.promise)
	if err := in.check(checkJobWait(ctx, in.WaitForRunningJob)); err != nil {
		return m.fail(ctx, PhaseValidating, err)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, SourceRegionKey.ValueSet(in.SourceRegion), TargetRegionKey.ValueSet(in.TargetRegion)); err != nil {
		return MigrateMachineResult{}, fmt.Errorf("upsert search attributes: %w", err)
	}
	if err := m.validate(ctx); err != nil {
		return m.fail(ctx, m.progress.Phase, err)
	}
	m.progress.StepsDone++
	steps := m.plan()
	m.progress.StepsTotal += len(steps)
	for _, s := range steps {
		if cancelledBetweenSteps(ctx, m.promise) {
			return m.fail(ctx, s.phase, temporal.NewCanceledError())
		}
		if err := m.setPhase(ctx, s.phase); err != nil {
			return m.fail(ctx, s.phase, err)
		}
		if s.undo != nil {
			m.comps.Add(s.undoName, s.undo)
		}
		if err := s.do(ctx); err != nil {
			if !m.promise || !s.commits {
				return m.fail(ctx, s.phase, err)
			}
			// The commit step failed or was cancelled, but may have taken effect: the target
			// decides whether the move is undone or finished.
			if done, err := m.activationFailed(ctx, err); !done {
				return m.result, err
			}
		}
		m.progress.StepsDone++
		if s.commits {
			m.comps.Commit()
			m.activated = true
			if m.promise {
				// Past the commit point the move is finished, not undone: a cancel does not
				// reach the remaining steps.
				var cancel workflow.CancelFunc
				ctx, cancel = workflow.NewDisconnectedContext(ctx)
				defer cancel()
			}
		}
	}
	return m.result, m.setPhase(ctx, PhaseCompleted)
}

// activationFailed handles a failed or cancelled activation in runs that keep the promise:
// when the target copy is active all the same, done is true and the move goes on; otherwise
// the steps are undone and the workflow's error is returned.
func (m *migration) activationFailed(ctx workflow.Context, err error) (done bool, _ error) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	active, cerr := m.activationTookEffect(dctx)
	if cerr == nil && active {
		m.progress.Errors = append(m.progress.Errors, fmt.Sprintf("%s: %v (the machine is active on %s all the same)", PhaseActivating, err, m.in.TargetRegion))
		return true, nil
	}
	_, ferr := m.fail(ctx, PhaseActivating, err)
	return false, ferr
}

// RedactedTicket replaces a ticket or a grant in a shown input.
const RedactedTicket = "[redacted]"

// Redacted is in without its ticket and grant, for showing it: a user's ticket may still be
// unspent, and a grant authorises the move until it expires.
func (in MigrateMachineInput) Redacted() MigrateMachineInput {
	in.Ticket, in.Grant = Redact(in.Ticket), Redact(in.Grant)
	return in
}

// Redact is RedactedTicket for a secret that is set, "" for one that is not.
func Redact(secret string) string {
	if secret == "" {
		return ""
	}
	return RedactedTicket
}

// check refuses an invalid input, with the problems found by the workflow's own checks.
func (in MigrateMachineInput) check(problems ...error) error {
	if in.SourceRegion == "" {
		problems = append(problems, errors.New("SourceRegion is empty"))
	}
	if in.TargetRegion == "" {
		problems = append(problems, errors.New("TargetRegion is empty"))
	}
	if in.Machine == "" {
		problems = append(problems, errors.New("Machine is empty"))
	}
	if in.WaitForRunningJob < 0 || in.AgentCheckInTimeout < 0 {
		problems = append(problems, errors.New("durations must not be negative"))
	}
	if err := errors.Join(problems...); err != nil {
		return temporal.NewNonRetryableApplicationError("invalid migration input: "+err.Error(), ErrTypeInvalidInput, nil)
	}
	return nil
}

// migration is the state of one MigrateMachine run.
type migration struct {
	in        MigrateMachineInput
	id        string
	machine   activities.ValidateResult
	ticket    string
	result    MigrateMachineResult
	progress  Progress
	comps     Compensations
	activated bool
	promise   bool // keepsPromise: the paths of promiseChange
	opts      stepOptions
	// finalizing is set once FinalizeMigration was asked for: from then on the source may
	// redirect the machine's agent to the target.
	finalizing    bool
	activeChecked *activeCheck // the answer of activationTookEffect, once asked
}

// step is one forward step of the plan and, for steps that change the source or target
// before activation, its undo.
type step struct {
	phase    string
	do       func(workflow.Context) error
	undoName string
	undo     func(workflow.Context) error
	commits  bool
}

// plan lists the steps after validation (README.md "How a migration behaves", steps 2-7).
func (m *migration) plan() []step {
	var steps []step
	if !m.in.SkipMachineMigration {
		if m.ticket == "" && !m.promise {
			steps = append(steps, step{phase: PhaseMintingTicket, do: m.mintTicket})
		}
		steps = append(steps,
			step{phase: PhaseQuiescing, do: m.quiesce, undoName: "unquiesce", undo: m.unquiesce},
			step{phase: PhaseCopying, do: m.copy, undoName: "delete-imported-copy", undo: m.deleteCopy},
			step{phase: PhaseFinalizing, do: m.finalize, undoName: "restore-migration", undo: m.restore},
		)
	}
	if m.machine.Repoint != activities.RepointNone {
		steps = append(steps, step{phase: PhaseRepointing, do: m.repoint})
	}
	if !m.in.SkipMachineMigration {
		steps = append(steps, step{phase: PhaseActivating, do: m.activate, commits: true})
		if m.in.SkipMachineDestroy != nil && !*m.in.SkipMachineDestroy {
			steps = append(steps, step{phase: PhaseDestroyingStub, do: m.deleteStub})
		}
	}
	return steps
}

// validate runs step 1; while a job runs on the machine it waits on a durable timer, up to
// WaitForRunningJob, and validates again.
func (m *migration) validate(ctx workflow.Context) error {
	started := workflow.Now(ctx)
	deadline := started.Add(m.in.WaitForRunningJob)
	in := activities.ValidateInput{
		Migration:    m.id,
		SourceRegion: m.in.SourceRegion,
		TargetRegion: m.in.TargetRegion,
		Machine:      m.in.Machine,
		AgentOnly:    m.in.SkipMachineMigration,
		Grant:        m.in.Grant,
	}
	in.Move, in.MoveRun = moveOf(ctx, m.in.MoveRun)
	for {
		if err := m.setPhase(ctx, PhaseValidating); err != nil {
			return err
		}
		if err := call(ctx, regionCallOptions, acts.ValidateMigration, in, &m.machine); err != nil {
			return err
		}
		if m.machine.RunningJob == "" {
			break
		}
		remaining := deadline.Sub(workflow.Now(ctx))
		if remaining <= 0 {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("machine %s (%s) is running job %s; waited %s for it to end", m.machine.MachineName, m.machine.MachineUuid, m.machine.RunningJob, m.in.WaitForRunningJob),
				ErrTypeJobRunning, nil)
		}
		if err := m.setPhase(ctx, PhaseWaitingForJob); err != nil {
			return err
		}
		if err := workflow.Sleep(ctx, min(jobPoll(ctx, workflow.Now(ctx).Sub(started)), remaining)); err != nil {
			return err
		}
	}
	m.result.MachineUuid, m.result.MachineName, m.result.TargetEndpoint = m.machine.MachineUuid, m.machine.MachineName, m.machine.TargetEndpoint
	m.result.StartedBy = m.machine.StartedBy
	attrs := []temporal.SearchAttributeUpdate{MachineUuidKey.ValueSet(m.machine.MachineUuid), MachineNameKey.ValueSet(m.machine.MachineName)}
	if m.machine.RackUuid != "" {
		attrs = append(attrs, RackUuidKey.ValueSet(m.machine.RackUuid))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, attrs...); err != nil {
		return err
	}
	return upsertStartedBy(ctx, m.machine.StartedBy)
}

func (m *migration) mintTicket(ctx workflow.Context) error {
	return call(ctx, regionCallOptions, acts.MintTicket, m.in.TargetRegion, &m.ticket)
}

func (m *migration) quiesce(ctx workflow.Context) error {
	return call(ctx, awaitedOnCancel(ctx, m.promise, holdAwaitedChange, regionCallOptions), acts.Quiesce, m.ref(m.in.SourceRegion), nil)
}

func (m *migration) unquiesce(ctx workflow.Context) error {
	return call(ctx, m.opts.undo, acts.Unquiesce, m.ref(m.in.SourceRegion), nil)
}

func (m *migration) copy(ctx workflow.Context) error {
	in := activities.CopyInput{SourceRegion: m.in.SourceRegion, TargetRegion: m.in.TargetRegion, Machine: m.machine.MachineUuid, Ticket: m.ticket, Migration: m.id, StartedBy: m.machine.StartedBy}
	var copied activities.CopyResult
	if err := call(ctx, m.opts.copy, acts.ExportImport, in, &copied); err != nil {
		return err
	}
	m.result.Jobs, m.result.Profiles = copied.Jobs, copied.Profiles
	return nil
}

// deleteCopy undoes the copy. Runs that keep the promise undo it only once the source holds
// the machine again, and leave a stub sending the agent back to the source when the source
// may have redirected it here.
func (m *migration) deleteCopy(ctx workflow.Context) error {
	if !m.promise {
		return call(ctx, mustFinishOptions, acts.DeleteImportedCopy, m.ref(m.in.TargetRegion), nil)
	}
	in := activities.UndoCopyInput{Source: m.ref(m.in.SourceRegion), Target: m.ref(m.in.TargetRegion), RedirectBack: m.finalizing}
	return call(ctx, m.opts.undo, acts.UndoCopy, in, nil)
}

func (m *migration) finalize(ctx workflow.Context) error {
	m.finalizing = true
	in := activities.FinalizeInput{MachineRef: m.ref(m.in.SourceRegion), RedirectEndpoint: m.machine.TargetEndpoint}
	return call(ctx, awaitedOnCancel(ctx, m.promise, finalizeAwaitedChange, regionCallOptions), acts.FinalizeMigration, in, nil)
}

func (m *migration) restore(ctx workflow.Context) error {
	return call(ctx, m.opts.undo, acts.RestoreMigration, m.ref(m.in.SourceRegion), nil)
}

// repoint is step 6: move the machine's agent to the target.
func (m *migration) repoint(ctx workflow.Context) error {
	switch m.machine.Repoint {
	case activities.RepointAgent:
		if err := m.waitForAgent(ctx); err != nil {
			return err
		}
		m.result.AgentRepointed = true
		return nil
	case activities.RepointESXi:
		// Runs recorded before the ESXi branch existed failed here; they replay the same.
		if workflow.GetVersion(ctx, esxiRepointChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return m.noRepoint()
		}
		return m.repointESXi(ctx)
	default:
		return m.noRepoint()
	}
}

func (m *migration) noRepoint() error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("no way to repoint the agent of machine %s: method %q", m.machine.MachineUuid, m.machine.Repoint), ErrTypeInvalidInput, nil)
}

// waitForAgent waits until the machine's agent checks in at the target.
func (m *migration) waitForAgent(ctx workflow.Context) error {
	timeout := m.in.AgentCheckInTimeout
	if timeout == 0 {
		timeout = DefaultAgentCheckInTimeout
	}
	in := activities.AgentWaitInput{
		MachineRef:   m.ref(m.in.TargetRegion),
		Previous:     m.machine.AgentLastSeen,
		Deadline:     workflow.Now(ctx).Add(timeout),
		PollInterval: agentPollInterval,
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout:    timeout + time.Minute,
		ScheduleToCloseTimeout: timeout + 5*time.Minute,
		HeartbeatTimeout:       time.Minute,
		RetryPolicy:            regionCallOptions.RetryPolicy,
	}
	return call(ctx, opts, acts.WaitForAgentCheckIn, in, nil)
}

// repointESXi rewrites the agent config of an ESXi host over SSH: Prepare (temporary key,
// sshd started) → RewriteAgentConfig → the agent's check-in at the target when it has one →
// Cleanup (keys and sshd as found). Cleanup is pushed as a compensation before Prepare runs,
// so a failure or a cancel at any point puts the host back; once it ran forward it is not
// run again. Runs that keep the promise also push the rewrite back to the source, which runs
// before Cleanup removes the temporary key (or, after Cleanup ran forward, installs one again).
func (m *migration) repointESXi(ctx workflow.Context) error {
	in := activities.ESXiInput{MachineRef: m.ref(m.in.TargetRegion), UseAgent: m.machine.AgentLastSeen != ""}
	cleaned := false
	cleanup := func(ctx workflow.Context) error {
		if cleaned {
			return nil
		}
		if err := call(ctx, m.opts.esxiUndo, acts.ESXiCleanup, in, nil); err != nil {
			return err
		}
		cleaned = true
		return nil
	}
	m.comps.Add("esxi-cleanup", cleanup)
	var prepared esxi.Prepared
	if err := call(ctx, esxiStepOptions, acts.ESXiPrepare, in, &prepared); err != nil {
		return err
	}
	// Pin the key Prepare verified (or accepted on first use) for every later connection.
	in.HostKey = prepared.HostKey
	rewrite := activities.ESXiRewriteInput{ESXiInput: in, Endpoint: m.machine.TargetEndpoint}
	if m.promise {
		m.comps.Add("esxi-rewrite-back", func(ctx workflow.Context) error {
			if cleaned {
				var p esxi.Prepared
				if err := call(ctx, m.opts.esxiUndo, acts.ESXiPrepare, in, &p); err != nil {
					return err
				}
				cleaned = false // the esxi-cleanup below runs again
			}
			back := activities.ESXiRewriteInput{ESXiInput: in, Endpoint: m.machine.SourceEndpoint}
			return call(ctx, m.opts.esxiUndo, acts.ESXiRewriteAgentConfig, back, nil)
		})
	}
	if err := call(ctx, esxiStepOptions, acts.ESXiRewriteAgentConfig, rewrite, nil); err != nil {
		return err
	}
	if in.UseAgent {
		if err := m.waitForAgent(ctx); err != nil {
			return err
		}
	}
	if err := cleanup(ctx); err != nil {
		return err
	}
	m.result.AgentRepointed = true
	return nil
}

func (m *migration) activate(ctx workflow.Context) error {
	return call(ctx, activateOptions, acts.Activate, m.ref(m.in.TargetRegion), nil)
}

// activationTookEffect is asked when activation failed or was cancelled: the activation may
// have taken effect all the same, and restoring the source would then leave the machine
// active on both regions. It reports whether the target copy is active, asking the target
// once per run. Runs recorded before this check compensated without it, and replay the same.
func (m *migration) activationTookEffect(ctx workflow.Context) (bool, error) {
	if m.activeChecked != nil {
		return m.activeChecked.active, m.activeChecked.err
	}
	if workflow.GetVersion(ctx, activationCheckChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false, nil
	}
	var active bool
	err := call(ctx, m.opts.finish, acts.IsActive, m.ref(m.in.TargetRegion), &active)
	m.activeChecked = &activeCheck{active: active, err: err}
	return active, err
}

type activeCheck struct {
	active bool
	err    error
}

func (m *migration) deleteStub(ctx workflow.Context) error {
	if err := call(ctx, regionCallOptions, acts.DeleteStub, m.ref(m.in.SourceRegion), nil); err != nil {
		return err
	}
	m.result.StubDeleted = true
	return nil
}

func (m *migration) ref(region string) activities.MachineRef {
	return activities.MachineRef{Region: region, Machine: m.machine.MachineUuid, Migration: m.id}
}

func (m *migration) setPhase(ctx workflow.Context, phase string) error {
	m.progress.Phase = phase
	return upsertPhase(ctx, phase)
}

// fail records err, runs the pending compensations and ends the workflow as failed (or
// cancelled). Compensation failures are returned together with the step's error.
func (m *migration) fail(ctx workflow.Context, phase string, err error) (MigrateMachineResult, error) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	cancelled := temporal.IsCanceledError(err) || errors.Is(ctx.Err(), workflow.ErrCanceled)
	if temporal.IsCanceledError(err) {
		err = temporal.NewCanceledError() // a step waited for on cancel wraps it
	}
	m.progress.Errors = append(m.progress.Errors, fmt.Sprintf("%s: %v", phase, err))
	if phase == PhaseActivating && !m.activated {
		// Every step before activation succeeded: the pending compensations are the undos
		// of the quiesce, copy and finalize (an ESXi cleanup among them already ran), which
		// must not run once the target is live.
		active, cerr := m.activationTookEffect(dctx)
		switch {
		case cerr != nil:
			m.progress.Errors = append(m.progress.Errors, cerr.Error())
			m.comps.Commit()
			err = temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("activating machine %s on %s failed: %v; then its state there could not be read (%v): nothing was undone, the source keeps its locked stub; activate the target or restore the source by hand",
					m.machine.MachineUuid, m.in.TargetRegion, err, cerr),
				ErrTypeCompensationFailed, err)
			cancelled = false
		case active:
			m.comps.Commit()
			m.activated = true
			cancelled = false
		}
	}
	if m.comps.Len() > 0 {
		if compErr := m.comps.Run(ctx); compErr != nil {
			if m.promise && m.comps.Stops(compErr) {
				compErr = m.keepLastCopy(dctx, compErr)
			}
			err = temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s failed: %v; then %v", phase, err, compErr), ErrTypeCompensationFailed, err)
			cancelled = false
		}
	}
	if m.activated && !cancelled {
		err = temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("machine %s is active on %s, but %s failed: %v", m.machine.MachineUuid, m.in.TargetRegion, phase, err), ErrTypeAfterActivation, err)
	}
	final := PhaseFailed
	if cancelled {
		final = PhaseCanceled
	}
	if perr := m.setPhase(dctx, final); perr != nil {
		err = errors.Join(err, perr)
	}
	return m.result, err
}

// keepLastCopy is run when an undo stopped because the source lost the machine: the copy on
// the target is then its only record, and is activated there so the machine stays active on
// one region. It returns the error to report, naming where the machine is.
func (m *migration) keepLastCopy(ctx workflow.Context, stopped error) error {
	if err := call(ctx, m.opts.finish, acts.Activate, m.ref(m.in.TargetRegion), nil); err != nil {
		return fmt.Errorf("%w; the machine is on neither region as far as this migration can tell: activating its copy on %s failed too: %v", stopped, m.in.TargetRegion, err)
	}
	return fmt.Errorf("%w; its copy on %s was activated instead: machine %s is active on %s, nothing more was undone", stopped, m.in.TargetRegion, m.machine.MachineUuid, m.in.TargetRegion)
}

func (m *migration) query() (Progress, error) {
	p := m.progress
	p.Errors = append([]string(nil), m.progress.Errors...)
	p.Operator = append([]string(nil), m.progress.Operator...)
	p.Pending = m.comps.Pending()
	return p, nil
}

// hasErrorType reports whether err is, or wraps, an application error of one of types.
func hasErrorType(err error, types ...string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && slices.Contains(types, appErr.Type())
}
