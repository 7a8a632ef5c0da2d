package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities/heartbeat"
	"github.com/ironflow/ironflow/region/api"
)

// Activities are the migration activities. Each one is idempotent: Temporal may run it again
// after a worker crash, so every call first looks at the region and does nothing when its
// effect is already there.
type Activities struct {
	Regions RegionResolver
	ESXi    ESXiConfig // SSH to ESXi hosts (repoint.go)
}

// RepointMethod says how the machine's agent is moved to the destination region.
type RepointMethod string

// Repoint methods; RepointESXi is in repoint.go.
const (
	RepointNone  RepointMethod = "none"  // no agent ever checked in: nothing to repoint
	RepointAgent RepointMethod = "agent" // the agent follows the stub's redirect; wait for its check-in
)

// ValidateInput names the machine and regions of one migration.
type ValidateInput struct {
	Migration    string // workflow ID, the value of Meta.migrating while the machine is quiesced
	SourceRegion string
	TargetRegion string
	Machine      string // UUID or "Field:value"
	// AgentOnly validates a SkipMachineMigration run: the machine already lives on the target
	// and only its agent moves.
	AgentOnly bool
	// Grant is the source region's authorisation of this move (grants.go).
	Grant string
	// Move is the root workflow of the move this migration is part of, MoveRun the first run
	// of its chain (api.GrantCheck); "" when it runs alone.
	Move    string `json:",omitempty"`
	MoveRun string `json:",omitempty"`
}

// ValidateResult is what the workflow keeps about the machine; small on purpose (it is
// stored in workflow history).
type ValidateResult struct {
	MachineUuid    string
	MachineName    string
	RackUuid       string
	TargetEndpoint string // public URL of the destination region
	SourceEndpoint string // public URL of the source region (empty in runs recorded before it)
	RunningJob     string // UUID of a job running on the source, "" when none
	Repoint        RepointMethod
	AgentLastSeen  string // Meta.agent-last-seen before the migration; a newer value means the agent moved
	StartedBy      string // the user the grant was issued to
}

// ValidateMigration checks both regions and the machine, and looks for conflicts on the
// destination. Every refusal is non-retryable and says what to fix.
func (a *Activities) ValidateMigration(ctx context.Context, in ValidateInput) (ValidateResult, error) {
	var res ValidateResult
	if in.SourceRegion == in.TargetRegion {
		return res, nonRetryable(ErrTypeRegionMismatch, "source and target region are both %q", in.SourceRegion)
	}
	src, srcInfo, err := a.checkedRegion(ctx, in.SourceRegion)
	if err != nil {
		return res, err
	}
	dst, dstInfo, err := a.checkedRegion(ctx, in.TargetRegion)
	if err != nil {
		return res, err
	}
	if srcInfo.Uuid != "" && srcInfo.Uuid == dstInfo.Uuid {
		return res, nonRetryable(ErrTypeRegionMismatch, "regions %q and %q are the same region (uuid %s)", in.SourceRegion, in.TargetRegion, srcInfo.Uuid)
	}
	res.TargetEndpoint, res.SourceEndpoint = dstInfo.URL, srcInfo.URL

	home, homeName := src, in.SourceRegion
	if in.AgentOnly {
		home, homeName = dst, in.TargetRegion
	}
	m, err := home.GetMachine(ctx, in.Machine)
	if isNotFound(err) {
		return res, nonRetryable(ErrTypeMachineNotFound, "machine %s not found on region %s", in.Machine, homeName)
	}
	if err != nil {
		return res, classify(err, "get machine %s on %s", in.Machine, homeName)
	}
	res.MachineUuid, res.MachineName, res.RackUuid = m.Uuid, m.Name, m.Rack
	res.AgentLastSeen = m.Meta[api.MetaAgentLastSeen]
	res.Repoint = repointMethod(m)
	if want := MigrateMachineID(m.Uuid); in.Migration != want {
		return res, nonRetryable(ErrNonCanonicalWorkID, "the migration of machine %s (%s) runs as workflow %q; start it as %q", m.Name, m.Uuid, in.Migration, want)
	}
	check := api.GrantCheck{Grant: in.Grant, TargetRegion: in.TargetRegion, Kind: api.GrantMachine, Key: m.Uuid, Migration: in.Migration, Move: in.Move, MoveRun: in.MoveRun}
	if res.StartedBy, err = verifyGrant(ctx, src, in.SourceRegion, check); err != nil {
		return res, err
	}
	if in.AgentOnly {
		return res, nil
	}

	if err := checkMigratable(m, in); err != nil {
		return res, err
	}
	if err := checkConflicts(ctx, dst, m, in.TargetRegion); err != nil {
		return res, err
	}
	if m.CurrentJob != "" {
		job, err := src.GetJob(ctx, m.CurrentJob)
		switch {
		case isNotFound(err):
		case err != nil:
			return res, classify(err, "get current job %s of machine %s on %s", m.CurrentJob, m.Uuid, in.SourceRegion)
		case job.State == api.JobRunning:
			res.RunningJob = job.Uuid
		}
	}
	return res, nil
}

// checkedRegion resolves a region and checks that it answers and is the region its name says.
func (a *Activities) checkedRegion(ctx context.Context, name string) (Region, api.Info, error) {
	r, err := a.Regions.Region(name)
	if err != nil {
		return nil, api.Info{}, err
	}
	info, err := r.Info(ctx)
	if err != nil {
		return nil, info, classify(err, "region %s info", name)
	}
	if info.Name != name {
		return nil, info, nonRetryable(ErrTypeRegionMismatch, "region %q of the regions file reports its name as %q: fix the worker's regions file", name, info.Name)
	}
	return r, info, nil
}

func checkMigratable(m api.Machine, in ValidateInput) error {
	switch {
	case m.WorkOrderMode:
		return nonRetryable(ErrTypeWorkOrderMode, "machine %s (%s) has WorkOrderMode set; turn it off to migrate", m.Name, m.Uuid)
	case m.Meta[api.MetaRedirectEndpoint] != "":
		// The detail is where it went, so a caller can tell a machine already on its target.
		to := m.Meta[api.MetaRedirectEndpoint]
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("machine %s (%s) on %s is a stub already migrated to %s", m.Name, m.Uuid, in.SourceRegion, to), ErrTypeAlreadyMigrated, nil, to)
	case m.Meta[api.MetaMigrating] != "" && m.Meta[api.MetaMigrating] != in.Migration:
		return nonRetryable(ErrTypeAlreadyMigrating, "machine %s (%s) is already being migrated by %s", m.Name, m.Uuid, m.Meta[api.MetaMigrating])
	}
	return nil
}

// checkConflicts refuses a destination that already has this machine, or another machine
// with the same Name or one of its MACs, and names every conflicting machine. The locked stub
// an earlier migration of this machine left there is no conflict: the import replaces it.
func checkConflicts(ctx context.Context, dst Region, m api.Machine, target string) error {
	var conflicts []string
	if existing, err := dst.GetMachine(ctx, m.Uuid); err == nil {
		if !isRedirectStub(existing) {
			conflicts = append(conflicts, fmt.Sprintf("machine %s already exists there", m.Uuid))
		}
	} else if !isNotFound(err) {
		return classify(err, "look up machine %s on %s", m.Uuid, target)
	}
	keys := []struct{ field, value string }{{"Name", m.Name}}
	for _, mac := range m.HardwareAddrs {
		keys = append(keys, struct{ field, value string }{"HardwareAddrs", mac})
	}
	for _, k := range keys {
		other, err := dst.GetMachine(ctx, k.field+":"+k.value)
		switch {
		case isNotFound(err):
		case err != nil:
			return classify(err, "look up %s %s on %s", k.field, k.value, target)
		case other.Uuid != m.Uuid:
			conflicts = append(conflicts, fmt.Sprintf("%s %s is used by machine %s (%s)", k.field, k.value, other.Name, other.Uuid))
		}
	}
	if len(conflicts) > 0 {
		return nonRetryable(ErrTypeDestinationConflict, "cannot migrate machine %s (%s) to %s: %s", m.Name, m.Uuid, target, strings.Join(conflicts, "; "))
	}
	return nil
}

// MintTicket mints a single-use import ticket on the target region and returns its token.
// Only runs recorded before ExportImport minted its own ticket call it: its result puts the
// ticket in workflow history.
func (a *Activities) MintTicket(ctx context.Context, targetRegion string) (string, error) {
	dst, err := a.Regions.Region(targetRegion)
	if err != nil {
		return "", err
	}
	return mintTicket(ctx, dst, targetRegion)
}

func mintTicket(ctx context.Context, dst Region, targetRegion string) (string, error) {
	t, err := dst.MintTicket(ctx, api.TicketRequest{})
	if err != nil {
		return "", classify(err, "mint a migrate ticket on %s", targetRegion)
	}
	return t.Token, nil
}

// MachineRef names a machine on a region, within a migration.
type MachineRef struct {
	Region    string
	Machine   string // UUID
	Migration string // workflow ID
}

// Quiesce stops new work on the source machine and marks it as held by this migration.
func (a *Activities) Quiesce(ctx context.Context, ref MachineRef) error {
	r, m, err := a.machine(ctx, ref)
	if err != nil {
		return err
	}
	switch m.Meta[api.MetaMigrating] {
	case ref.Migration:
		return nil // quiesced by this migration before a crash
	case "":
	default:
		return nonRetryable(ErrTypeAlreadyMigrating, "machine %s is already being migrated by %s", ref.Machine, m.Meta[api.MetaMigrating])
	}
	_, err = r.Quiesce(ctx, ref.Machine, api.QuiesceRequest{Migration: ref.Migration})
	return classify(err, "quiesce machine %s on %s", ref.Machine, ref.Region)
}

// Unquiesce undoes Quiesce; it does nothing when this migration does not hold the machine.
// Nor when the machine is gone: a region refuses to delete a machine a migration holds, so an
// operator deleted it before the quiesce held it, and there is nothing to undo (it is the
// first undo pushed, so the last to run: stopping would only misreport the move).
//
// A source that is a stub again is a finalize that landed after the undos of the finalize and
// of the copy ran: the copy on the target is undone, so the stub is the machine's only record
// and is restored first, or the machine would be active on no region.
func (a *Activities) Unquiesce(ctx context.Context, ref MachineRef) error {
	r, m, err := a.machine(ctx, ref)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if isRedirectStub(m) {
		if m, err = r.RestoreMigrationFor(ctx, ref.Machine, ref.Migration); err != nil {
			return classify(err, "restore machine %s on %s, finalized after its undo", ref.Machine, ref.Region)
		}
	}
	if m.Meta[api.MetaMigrating] != ref.Migration {
		return nil
	}
	_, err = r.UnquiesceFor(ctx, ref.Machine, ref.Migration)
	return classify(err, "unquiesce machine %s on %s", ref.Machine, ref.Region)
}

// CopyInput names the two ends of the copy.
type CopyInput struct {
	SourceRegion string
	TargetRegion string
	Machine      string // UUID
	// Ticket is a ticket the user minted on the target; empty: ExportImport mints one there
	// itself, so no ticket enters workflow history.
	Ticket    string
	Migration string // workflow ID; it holds the imported copy on the target until activation
	StartedBy string // who started the move, for the target's audit log
}

// CopyResult counts what was copied.
type CopyResult struct {
	Jobs     int
	Profiles int
}

// ExportImport exports the machine's bundle from the source and imports it, inactive, into
// the target, inside one activity so the bundle and the ticket never enter workflow history.
// Validation made sure the target had no machine with this UUID but the locked stub of an
// earlier migration, which the import replaces; any other inactive copy found there is the
// result of an earlier attempt of this activity and is kept. It heartbeats while it runs, so
// a cancelled workflow stops it and waits for it before undoing the copy.
func (a *Activities) ExportImport(ctx context.Context, in CopyInput) (CopyResult, error) {
	var res CopyResult
	err := heartbeat.While(ctx, func(ctx context.Context) error {
		var err error
		res, err = a.exportImport(ctx, in)
		return err
	})
	return res, err
}

func (a *Activities) exportImport(ctx context.Context, in CopyInput) (CopyResult, error) {
	src, err := a.Regions.Region(in.SourceRegion)
	if err != nil {
		return CopyResult{}, err
	}
	dst, err := a.Regions.Region(in.TargetRegion)
	if err != nil {
		return CopyResult{}, err
	}
	bundle, err := src.Export(ctx, in.Machine)
	if err != nil {
		return CopyResult{}, classify(err, "export machine %s from %s", in.Machine, in.SourceRegion)
	}
	res := CopyResult{Jobs: len(bundle.Jobs), Profiles: len(bundle.Profiles)}
	existing, err := dst.GetMachine(ctx, in.Machine)
	switch {
	case err == nil && isRedirectStub(existing):
	case err == nil && existing.Runnable:
		return res, nonRetryable(ErrTypeDestinationConflict, "machine %s is already active on %s", in.Machine, in.TargetRegion)
	case err == nil:
		activity.GetLogger(ctx).Info("machine already imported by an earlier attempt", "machine", in.Machine, "region", in.TargetRegion)
		return res, nil
	case !isNotFound(err):
		return res, classify(err, "look up machine %s on %s", in.Machine, in.TargetRegion)
	}
	ticket := in.Ticket
	if ticket == "" {
		if ticket, err = mintTicket(ctx, dst, in.TargetRegion); err != nil {
			return res, err
		}
	}
	if _, err := dst.Import(ctx, api.ImportRequest{Ticket: ticket, Bundle: bundle, Migration: in.Migration, StartedBy: in.StartedBy}); err != nil {
		return res, classify(err, "region %s refused the import of machine %s", in.TargetRegion, in.Machine)
	}
	return res, nil
}

// DeleteImportedCopy undoes ExportImport. It never deletes an active machine: that would
// leave the machine active nowhere; nor a locked stub, which the import never replaced (an
// imported copy is never a stub).
func (a *Activities) DeleteImportedCopy(ctx context.Context, ref MachineRef) error {
	r, m, err := a.machine(ctx, ref)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if isRedirectStub(m) {
		return nil
	}
	if m.Runnable {
		return nonRetryable(ErrTypeUnsafeDelete, "machine %s is active on %s; not deleting it", ref.Machine, ref.Region)
	}
	return a.deleteMachine(ctx, r, ref)
}

// FinalizeInput names the source machine and where its stub redirects to.
type FinalizeInput struct {
	MachineRef
	RedirectEndpoint string
}

// FinalizeMigration turns the source record into the locked stub redirecting to the target.
func (a *Activities) FinalizeMigration(ctx context.Context, in FinalizeInput) error {
	r, m, err := a.machine(ctx, in.MachineRef)
	if err != nil || m.Meta[api.MetaRedirectEndpoint] == in.RedirectEndpoint {
		return err
	}
	_, err = r.FinalizeMigrationFor(ctx, in.Machine, in.Migration, api.FinalizeRequest{RedirectEndpoint: in.RedirectEndpoint})
	return classify(err, "finalize machine %s on %s", in.Machine, in.Region)
}

// RestoreMigration undoes FinalizeMigration; it does nothing when the machine is not a stub.
// A machine gone from the region is ErrTypeMachineNotFound: the copy on the target may be its
// last record.
func (a *Activities) RestoreMigration(ctx context.Context, ref MachineRef) error {
	r, m, err := a.sourceMachine(ctx, ref)
	if err != nil || m.Meta[api.MetaRedirectEndpoint] == "" {
		return err
	}
	_, err = r.RestoreMigrationFor(ctx, ref.Machine, ref.Migration)
	return classify(err, "restore machine %s on %s", ref.Machine, ref.Region)
}

// Activate makes the imported machine runnable on the target (idempotent on the region).
func (a *Activities) Activate(ctx context.Context, ref MachineRef) error {
	r, err := a.Regions.Region(ref.Region)
	if err != nil {
		return err
	}
	_, err = r.ActivateFor(ctx, ref.Machine, ref.Migration)
	return classify(err, "activate machine %s on %s", ref.Machine, ref.Region)
}

// IsActive reports whether the machine is active (Runnable) on ref's region; a missing
// machine is not. The workflow asks before it compensates a failed activation, which may
// have taken effect all the same.
func (a *Activities) IsActive(ctx context.Context, ref MachineRef) (bool, error) {
	_, m, err := a.machine(ctx, ref)
	if isNotFound(err) {
		return false, nil
	}
	return err == nil && m.Runnable, err
}

// DeleteStub removes the locked stub left on the source. It refuses to delete anything that
// is not a stub, so a live record is never lost.
func (a *Activities) DeleteStub(ctx context.Context, ref MachineRef) error {
	r, m, err := a.machine(ctx, ref)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !isRedirectStub(m) {
		return nonRetryable(ErrTypeUnsafeDelete, "machine %s on %s is not a migrated stub; not deleting it", ref.Machine, ref.Region)
	}
	return a.deleteMachine(ctx, r, ref)
}

// AgentWaitInput says which check-in to wait for, and until when.
type AgentWaitInput struct {
	MachineRef
	Previous     string    // Meta.agent-last-seen before the migration
	Deadline     time.Time // absolute, so a retried attempt does not extend the wait
	PollInterval time.Duration
}

// WaitForAgentCheckIn polls the target until the machine's agent has checked in there
// (Meta.agent-last-seen differs from Previous), heartbeating so a cancelled workflow stops it.
func (a *Activities) WaitForAgentCheckIn(ctx context.Context, in AgentWaitInput) error {
	r, err := a.Regions.Region(in.Region)
	if err != nil {
		return err
	}
	ticker := time.NewTicker(in.PollInterval)
	defer ticker.Stop()
	for {
		m, err := r.GetMachine(ctx, in.Machine)
		switch {
		case err == nil && m.Meta[api.MetaAgentLastSeen] != "" && m.Meta[api.MetaAgentLastSeen] != in.Previous:
			return nil
		case err != nil && isFinal(err):
			return classify(err, "get machine %s on %s", in.Machine, in.Region)
		case err != nil:
			activity.GetLogger(ctx).Warn("polling for the agent check-in", "machine", in.Machine, "error", err)
		}
		if !time.Now().Before(in.Deadline) {
			return nonRetryable(ErrTypeAgentCheckInTimeout, "the agent of machine %s did not check in at %s by %s", in.Machine, in.Region, in.Deadline.Format(time.RFC3339))
		}
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// machine resolves ref's region and reads the machine, classifying the error.
func (a *Activities) machine(ctx context.Context, ref MachineRef) (Region, api.Machine, error) {
	r, err := a.Regions.Region(ref.Region)
	if err != nil {
		return nil, api.Machine{}, err
	}
	m, err := r.GetMachine(ctx, ref.Machine)
	// A 404 stays visible to isNotFound through the application error's cause: callers
	// decide whether a missing machine means done or wrong.
	return r, m, classify(err, "get machine %s on %s", ref.Machine, ref.Region)
}

// sourceMachine is machine for the undos on the source, where a missing machine is
// ErrTypeMachineNotFound: someone removed it during the migration.
func (a *Activities) sourceMachine(ctx context.Context, ref MachineRef) (Region, api.Machine, error) {
	r, m, err := a.machine(ctx, ref)
	if isNotFound(err) {
		return r, m, nonRetryable(ErrTypeMachineNotFound, "machine %s is gone from %s, where migration %s left it", ref.Machine, ref.Region, ref.Migration)
	}
	return r, m, err
}

func (a *Activities) deleteMachine(ctx context.Context, r Region, ref MachineRef) error {
	err := r.DeleteMachine(ctx, ref.Machine, ref.Migration)
	if isNotFound(err) {
		return nil
	}
	return classify(err, "delete machine %s on %s", ref.Machine, ref.Region)
}

// isRedirectStub reports the locked stub a migration leaves on its source, redirecting to
// where the machine went.
func isRedirectStub(m api.Machine) bool {
	return m.Locked && m.Meta[api.MetaRedirectEndpoint] != ""
}
