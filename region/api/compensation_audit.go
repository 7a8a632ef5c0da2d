package api

// An operator's answer to a migration's stuck compensation (the workflow's compensation
// Update: retry or abandon, with a reason) is audited on the source region:
//
//	POST /api/v1/machines/{uuid}/compensation-decisions   CompensationDecision (204; event compensation-retry or compensation-abandon)

// CompensationDecision is one operator request a migration acted on.
type CompensationDecision struct {
	Migration    string `json:"Migration"`    // workflow ID
	Action       string `json:"Action"`       // "retry" or "abandon"
	Reason       string `json:"Reason"`       // the operator's
	By           string `json:"By"`           // the operator (whoami of their token)
	Compensation string `json:"Compensation"` // the undo that was failing
}
