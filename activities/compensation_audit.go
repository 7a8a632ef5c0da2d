package activities

import (
	"context"

	"github.com/ironflow/ironflow/region/api"
)

// CompensationAuditor records an operator's answer to a stuck compensation on a region;
// ClientRegion implements it.
type CompensationAuditor interface {
	RecordCompensationDecision(ctx context.Context, machine string, d api.CompensationDecision) error
}

// CompensationAuditInput is one operator decision a migration acted on, to audit on Region
// (the migration's source, where the operator's role was checked).
type CompensationAuditInput struct {
	Region   string
	Machine  string // UUID
	Decision api.CompensationDecision
}

// AuditCompensationDecision writes the decision into the region's audit log.
func (a *Activities) AuditCompensationDecision(ctx context.Context, in CompensationAuditInput) error {
	r, err := a.Regions.Region(in.Region)
	if err != nil {
		return err
	}
	auditor, ok := r.(CompensationAuditor)
	if !ok {
		return nonRetryable(ErrTypeRegionRefused, "the client of region %s cannot audit compensation decisions", in.Region)
	}
	return classify(auditor.RecordCompensationDecision(ctx, in.Machine, in.Decision), "audit the %s of a compensation of migration %s on %s", in.Decision.Action, in.Decision.Migration, in.Region)
}

// MoveControlAuditor records an operator's control of a move on a region; ClientRegion
// implements it.
type MoveControlAuditor interface {
	RecordMoveControl(ctx context.Context, c api.MoveControl) error
}

// MoveControlAuditInput is one operator control a move accepted, to audit on Region (the
// move's source, where the operator's role was checked).
type MoveControlAuditInput struct {
	Region  string
	Control api.MoveControl
}

// AuditMoveControl writes the control into the region's audit log.
func (a *Activities) AuditMoveControl(ctx context.Context, in MoveControlAuditInput) error {
	r, err := a.Regions.Region(in.Region)
	if err != nil {
		return err
	}
	auditor, ok := r.(MoveControlAuditor)
	if !ok {
		return nonRetryable(ErrTypeRegionRefused, "the client of region %s cannot audit move controls", in.Region)
	}
	return classify(auditor.RecordMoveControl(ctx, in.Control), "audit the %s of %s on %s", in.Control.Action, in.Control.Migration, in.Region)
}
