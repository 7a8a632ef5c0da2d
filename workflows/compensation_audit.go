package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/region/api"
)

// compensationAuditChange is the GetVersion change ID of the audit, on the source region, of
// an operator's answer to a stuck compensation.
const compensationAuditChange = "compensation-audit"

// auditDecision writes req into the source region's audit log (event compensation-retry or
// compensation-abandon, naming the operator, the reason and the undo). A failure to audit is
// reported in the progress; it does not hold the compensation up.
func (m *migration) auditDecision(ctx workflow.Context, req CompensationRequest, compensation string) {
	if workflow.GetVersion(ctx, compensationAuditChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	in := activities.CompensationAuditInput{Region: m.in.SourceRegion, Machine: m.machine.MachineUuid, Decision: api.CompensationDecision{
		Migration: m.id, Action: req.Action, Reason: req.Reason, By: req.By, Compensation: compensation}}
	if err := call(ctx, regionCallOptions, acts.AuditCompensationDecision, in, nil); err != nil {
		m.progress.Errors = append(m.progress.Errors, "audit of the operator's "+req.Action+": "+err.Error())
	}
}
