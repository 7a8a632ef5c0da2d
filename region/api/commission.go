package api

// Commissioning a machine added by its BMC (ARCHITECTURE.md "Commissioning"): the
// CommissionMachine workflow powers the machine on through its rack, waits for the discovery
// image's agent to enlist it onto its record and upload its inventory, powers it off and
// records the outcome on the machine through the rack.
//
//	PUT /api/v1/racks/{uuid}/machines/{machine}/commissioning  CommissionReport -> Machine (the machine's rack)

// The statuses of commissioning, after StatusNew and before or instead of StatusReady.
const (
	StatusCommissioning       = "Commissioning"        // powered on to enlist; its previous inventory is dropped
	StatusFailedCommissioning = "Failed commissioning" // StatusReason says at which step and why
)

// MaxStatusReason bounds a machine's StatusReason, in bytes.
const MaxStatusReason = 1024

// CommissionReport is a commissioning step's outcome as the machine's rack reports it:
// Status is StatusCommissioning (the start: the machine's inventory and commissioning results
// are cleared, so only what the machine reports now can make it Ready), StatusReady (the
// region refuses it while the machine has no inventory) or StatusFailedCommissioning, with the
// Reason.
type CommissionReport struct {
	Status   string `json:"Status"`
	Reason   string `json:"Reason,omitempty"`
	Workflow string `json:"Workflow,omitempty"` // the workflow that reports, for the audit
}
