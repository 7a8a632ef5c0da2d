package api

// Rack transfer holds and their recovery. While a TransferRack run holds a rack, each region
// records which run in the rack's Meta: the source when the run pauses it, the target when
// the run imports its copy. Terminating a transfer runs none of its undos, so the rack stays
// paused on the source and its copy stays on the target; the hold is what lets the next
// transfer of the rack (or `ironflow racks recover`) find that leftover and undo or finish it.
//
//	POST /api/v1/racks/{uuid}/pause     [RackHold] -> Rack (the hold is recorded as the source's)
//	POST /api/v1/racks/{uuid}/recover   RackRecovery -> RackRecovered (undoes or finishes a closed run's hold here)

// Meta keys of a rack held by a transfer; ending the pause removes them.
const (
	MetaTransfer     = "transfer"      // workflow ID of the transfer holding the rack
	MetaTransferRun  = "transfer-run"  // its run ID
	MetaTransferRole = "transfer-role" // RoleSource or RoleTarget
	MetaTransferFrom = "transfer-from" // source region name (worker's regions file)
	MetaTransferTo   = "transfer-to"   // target region name
)

// The roles of a region in a rack transfer.
const (
	TransferSource = "source"
	TransferTarget = "target"
)

// RackHold is the transfer run that holds a rack on a region.
type RackHold struct {
	Transfer string `json:"Transfer"` // workflow ID
	Run      string `json:"Run"`      // run ID
	Role     string `json:"Role"`     // TransferSource or TransferTarget
	From     string `json:"From"`     // source region name
	To       string `json:"To"`       // target region name
}

// IsZero reports a rack no transfer holds (or one paused before holds were recorded).
func (h RackHold) IsZero() bool { return h.Transfer == "" }

// RackHoldOf reads the hold recorded in a rack's Meta.
func RackHoldOf(r Rack) RackHold {
	return RackHold{Transfer: r.Meta[MetaTransfer], Run: r.Meta[MetaTransferRun], Role: r.Meta[MetaTransferRole],
		From: r.Meta[MetaTransferFrom], To: r.Meta[MetaTransferTo]}
}

// Record writes h into meta; a zero h removes the hold.
func (h RackHold) Record(meta map[string]string) {
	for k, v := range map[string]string{MetaTransfer: h.Transfer, MetaTransferRun: h.Run, MetaTransferRole: h.Role, MetaTransferFrom: h.From, MetaTransferTo: h.To} {
		if h.IsZero() || v == "" {
			delete(meta, k)
			continue
		}
		meta[k] = v
	}
}

// Recovery actions on one region, for the hold of a transfer run that has closed.
const (
	RecoverUnpause    = "unpause"     // end the pause (the source of an undone move, or the target of a finished one)
	RecoverDeleteCopy = "delete-copy" // delete what the run's import created (the target of an undone move)
	RecoverHandOver   = "hand-over"   // remove the rack without force (the source of a finished move)
)

// RackRecovery asks a region to act on a rack held by Hold, a transfer run that has closed.
// The region refuses (409) a rack held by another run, and does nothing for a rack no longer
// held by Hold (the action was done already).
type RackRecovery struct {
	Hold        RackHold `json:"Hold"`
	Action      string   `json:"Action"`
	Outcome     string   `json:"Outcome"`     // "undone" or "finished": what the recovery makes of the move, for the audit event
	RecoveredBy string   `json:"RecoveredBy"` // the workflow (ID and run) that recovers
	StartedBy   string   `json:"StartedBy,omitempty"`
}

// Recovery outcomes.
const (
	RecoveryUndone   = "undone"
	RecoveryFinished = "finished"
)

// RackRecovered says whether the region acted (false: nothing of Hold was left here).
type RackRecovered struct {
	Done bool `json:"Done"`
}
