package activities

import (
	"context"
	"strings"

	"github.com/ironflow/ironflow/activities/heartbeat"
	"github.com/ironflow/ironflow/region/api"
)

// RackRegion is what the rack transfer activities need from a region besides Region
// (region/api/transfer.go). ClientRegion implements it.
type RackRegion interface {
	Info(ctx context.Context) (api.Info, error)
	GetRack(ctx context.Context, key string) (api.Rack, error)
	PauseRack(ctx context.Context, rack string, hold api.RackHold) (api.Rack, error)
	UnpauseRack(ctx context.Context, rack string) (api.Rack, error)
	ExportRack(ctx context.Context, rack string) (api.RackBundle, error)
	CheckRackImport(ctx context.Context, b api.RackBundle) (api.TransferCheck, error)
	ImportRack(ctx context.Context, b api.RackBundle) (api.RackImport, error)
	UndoRackImport(ctx context.Context, rack string) error
	HandOverRack(ctx context.Context, rack string) error
	RackOperations(ctx context.Context, rack string) ([]api.PendingOperation, error)
	ReleaseRackOperations(ctx context.Context, rack string, rel api.OperationsRelease) ([]api.PendingOperation, error)
	RecoverRackTransfer(ctx context.Context, rack string, rec api.RackRecovery) (api.RackRecovered, error)
	GrantVerifier
}

// GetRack returns the rack at key (UUID or "Field:value").
func (c ClientRegion) GetRack(ctx context.Context, key string) (api.Rack, error) {
	return c.Racks().Get(ctx, key)
}

// Application error types (temporal.ApplicationError.Type()) of the rack transfer; the
// values are recorded in histories and must never change.
const (
	ErrTypeRackNotFound   = "RackNotFound"
	ErrTypeRackNotOnline  = "RackNotOnline"
	ErrTypeNoRackTransfer = "NoRackTransfer"
)

// TransferInput names the rack and the regions of one rack transfer.
type TransferInput struct {
	SourceRegion string
	TargetRegion string
	Rack         string // UUID
	Grant        string `json:",omitempty"` // the source's rack grant (grants.go); checked by ValidateTransfer
}

// RackRef is a rack on one region.
type RackRef struct {
	Region string
	Rack   string // UUID
}

// TransferPlan is what the transfer keeps after validation; small on purpose (it is stored
// in workflow history): machine UUIDs, counts and the target's URLs, never the objects.
type TransferPlan struct {
	RackName        string
	Machines        []string // UUIDs of the machines behind the rack still on the source
	VLANs           int
	Subnets         int
	Pods            int
	Leases          int
	TargetURL       string
	TargetEndpoints []string // the target cluster's URLs, for the rack's new region link
	StartedBy       string   `json:",omitempty"` // the user the grant was issued to
}

// ValidateTransfer checks that both regions answer as themselves, that the rack is online on
// the source and can be exported (no VLAN shared with another rack), and that nothing on the
// target conflicts with it: subnet CIDRs, rack, fabric and pod names, machine names and MACs.
// Every refusal is non-retryable and names what to fix.
func (a *Activities) ValidateTransfer(ctx context.Context, in TransferInput) (TransferPlan, error) {
	var plan TransferPlan
	if in.SourceRegion == in.TargetRegion {
		return plan, nonRetryable(ErrTypeRegionMismatch, "source and target region are both %q", in.SourceRegion)
	}
	src, _, err := a.checkedRackRegion(ctx, in.SourceRegion)
	if err != nil {
		return plan, err
	}
	dst, dstInfo, err := a.checkedRackRegion(ctx, in.TargetRegion)
	if err != nil {
		return plan, err
	}
	rack, err := src.GetRack(ctx, in.Rack)
	if isNotFound(err) {
		return plan, nonRetryable(ErrTypeRackNotFound, "rack %s not found on region %s", in.Rack, in.SourceRegion)
	}
	if err != nil {
		return plan, classify(err, "get rack %s on %s", in.Rack, in.SourceRegion)
	}
	in.Rack = rack.Uuid
	startedBy, err := a.verifyRackGrant(ctx, in)
	if err != nil {
		return plan, err
	}
	if rack.Status != api.RackOnline {
		return plan, nonRetryable(ErrTypeRackNotOnline, "rack %s (%s) is %s on %s; only an online rack can be transferred", rack.Name, rack.Uuid, rack.Status, in.SourceRegion)
	}
	b, err := src.ExportRack(ctx, rack.Uuid)
	if err != nil {
		return plan, classify(err, "export rack %s from %s", rack.Name, in.SourceRegion)
	}
	check, err := dst.CheckRackImport(ctx, b)
	if err != nil {
		return plan, classify(err, "check rack %s against %s", rack.Name, in.TargetRegion)
	}
	if len(check.Conflicts) > 0 {
		return plan, nonRetryable(ErrTypeDestinationConflict, "rack %s cannot move to %s: %s", rack.Name, in.TargetRegion, strings.Join(check.Conflicts, "; "))
	}
	plan = TransferPlan{
		RackName: rack.Name, VLANs: len(b.VLANs), Subnets: len(b.Subnets), Pods: len(b.Pods), Leases: len(b.Leases),
		TargetURL: dstInfo.URL, TargetEndpoints: dstInfo.Endpoints, StartedBy: startedBy,
	}
	if len(plan.TargetEndpoints) == 0 {
		plan.TargetEndpoints = []string{dstInfo.URL}
	}
	for _, m := range b.Machines {
		plan.Machines = append(plan.Machines, m.Uuid)
	}
	return plan, nil
}

// checkedRackRegion is checkedRegion for a region that can take part in a rack transfer.
func (a *Activities) checkedRackRegion(ctx context.Context, name string) (RackRegion, api.Info, error) {
	r, info, err := a.checkedRegion(ctx, name)
	if err != nil {
		return nil, info, err
	}
	rr, ok := r.(RackRegion)
	if !ok {
		return nil, info, nonRetryable(ErrTypeNoRackTransfer, "the client of region %s cannot transfer racks", name)
	}
	return rr, info, nil
}

func (a *Activities) rackRegion(name string) (RackRegion, error) {
	r, err := a.Regions.Region(name)
	if err != nil {
		return nil, err
	}
	rr, ok := r.(RackRegion)
	if !ok {
		return nil, nonRetryable(ErrTypeNoRackTransfer, "the client of region %s cannot transfer racks", name)
	}
	return rr, nil
}

// PauseRack marks the rack paused on ref.Region, held by the calling transfer run
// (transfer_recovery.go); operations for its machines are queued.
func (a *Activities) PauseRack(ctx context.Context, ref RackRef) error {
	r, err := a.rackRegion(ref.Region)
	if err != nil {
		return err
	}
	_, err = r.PauseRack(ctx, ref.Rack, transferHold(ctx, ref.Region, ""))
	return classify(err, "pause rack %s on %s", ref.Rack, ref.Region)
}

// UnpauseRack ends the rack's pause on ref.Region; a rack that is gone has nothing to unpause.
func (a *Activities) UnpauseRack(ctx context.Context, ref RackRef) error {
	r, err := a.rackRegion(ref.Region)
	if err != nil {
		return err
	}
	if _, err = r.UnpauseRack(ctx, ref.Rack); isNotFound(err) {
		return nil
	}
	return classify(err, "unpause rack %s on %s", ref.Rack, ref.Region)
}

// CopyRack exports the rack's network, pods and leases from the source and imports them
// into the target (idempotent upserts by UUID; the rack arrives paused there). It heartbeats
// while it runs, so a cancelled transfer waits for it before undoing the copy.
func (a *Activities) CopyRack(ctx context.Context, in TransferInput) (api.RackImport, error) {
	var res api.RackImport
	err := heartbeat.While(ctx, func(ctx context.Context) error {
		var err error
		res, err = a.copyRack(ctx, in)
		return err
	})
	return res, err
}

func (a *Activities) copyRack(ctx context.Context, in TransferInput) (api.RackImport, error) {
	src, dst, err := a.rackRegions(in.SourceRegion, in.TargetRegion)
	if err != nil {
		return api.RackImport{}, err
	}
	// The source's hold names the target from now on, so a recovery that finds either half
	// of this run's leftover finds the other.
	hold := transferHold(ctx, in.SourceRegion, in.TargetRegion)
	if _, err := src.PauseRack(ctx, in.Rack, hold); err != nil {
		return api.RackImport{}, classify(err, "record the transfer to %s on rack %s of %s", in.TargetRegion, in.Rack, in.SourceRegion)
	}
	b, err := src.ExportRack(ctx, in.Rack)
	if err != nil {
		return api.RackImport{}, classify(err, "export rack %s from %s", in.Rack, in.SourceRegion)
	}
	b.Hold = &hold
	res, err := dst.ImportRack(ctx, b)
	return res, classify(err, "import rack %s into %s", in.Rack, in.TargetRegion)
}

// UndoRackCopy deletes what CopyRack created on ref.Region (compensation).
func (a *Activities) UndoRackCopy(ctx context.Context, ref RackRef) error {
	r, err := a.rackRegion(ref.Region)
	if err != nil {
		return err
	}
	return classify(r.UndoRackImport(ctx, ref.Rack), "undo the import of rack %s on %s", ref.Rack, ref.Region)
}

// HandOverRack removes the moved rack from ref.Region without force, after dropping the
// network and pods that moved with it. A rack already gone is done.
func (a *Activities) HandOverRack(ctx context.Context, ref RackRef) error {
	r, err := a.rackRegion(ref.Region)
	if err != nil {
		return err
	}
	if err := r.HandOverRack(ctx, ref.Rack); err != nil && !isNotFound(err) {
		return classify(err, "remove rack %s from %s", ref.Rack, ref.Region)
	}
	return nil
}

// ReleaseResult counts the operations released on the target.
type ReleaseResult struct {
	Released int
}

// ReleaseRack hands the operations queued on the source for the rack and its machines over
// to the target, releases the rack's queue there, marks the handed-over ones released on the
// source and ends the rack's pause on the target. Retrying stores nothing twice. It runs after
// the hand-over, when the source no longer has the rack and so queues nothing more for it.
func (a *Activities) ReleaseRack(ctx context.Context, in TransferInput) (ReleaseResult, error) {
	src, dst, err := a.rackRegions(in.SourceRegion, in.TargetRegion)
	if err != nil {
		return ReleaseResult{}, err
	}
	res, err := handOverOperations(ctx, src, dst, in.SourceRegion, in.TargetRegion, in.Rack)
	if err != nil {
		return res, err
	}
	if _, err := dst.UnpauseRack(ctx, in.Rack); err != nil {
		return ReleaseResult{}, classify(err, "unpause rack %s on %s", in.Rack, in.TargetRegion)
	}
	return res, nil
}

// rackRegions returns the regions named source and target.
func (a *Activities) rackRegions(source, target string) (RackRegion, RackRegion, error) {
	src, err := a.rackRegion(source)
	if err != nil {
		return nil, nil, err
	}
	dst, err := a.rackRegion(target)
	return src, dst, err
}

// handOverOperations is ReleaseRack but for the end of the target's pause.
func handOverOperations(ctx context.Context, src, dst RackRegion, source, target, rack string) (ReleaseResult, error) {
	queued, err := src.RackOperations(ctx, rack)
	if err != nil {
		return ReleaseResult{}, classify(err, "list operations of rack %s on %s", rack, source)
	}
	released, err := dst.ReleaseRackOperations(ctx, rack, api.OperationsRelease{Origin: source, Operations: queued})
	if err != nil {
		return ReleaseResult{}, classify(err, "release operations of rack %s on %s", rack, target)
	}
	if _, err := src.ReleaseRackOperations(ctx, rack, api.OperationsRelease{}); err != nil {
		return ReleaseResult{}, classify(err, "mark operations of rack %s handed over on %s", rack, source)
	}
	return ReleaseResult{Released: len(released)}, nil
}
