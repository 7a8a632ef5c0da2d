package api

// Writes queued while a rack is paused (transfer.go). The region checks the caller's role and
// validates the write as it would now, then stores it as a PendingOperation of Kind
// OperationWrite for the rack (Target: the rack's UUID) instead of applying it. When the
// rack's pause ends on the region that then owns it (the target after a transfer, the
// source when the transfer is undone), its queued writes are replayed there in order, as
// their caller, each once; a write whose replay fails is settled with its error and audited,
// and the others still run.

// OperationWrite is the Kind of a queued API write; its Payload is a WriteRequest.
const OperationWrite = "write"

// Outcomes of a queued write (PendingOperation.Outcome); a failed replay has its error.
const (
	OutcomeApplied    = "applied"
	OutcomeHandedOver = "handed over"
	OutcomeReplaying  = "replaying"
	// OutcomeDropped: queued on a transfer's target for its copy of the rack, which the
	// undone transfer deleted.
	OutcomeDropped = "dropped: the rack's transfer was undone here"
)

// Limits of the queue, so that one client cannot fill a region's database.
const (
	MaxQueuedOperations = 1000     // unreleased operations per rack (429 beyond)
	MaxQueuedWriteBody  = 64 << 10 // bytes of one queued write's body (413 beyond)
)

// HeaderMove marks a write as part of a move (the workers' region calls): it is applied even
// while its rack is paused, since the move itself is what holds the rack. Only an admin's mark
// counts (the workers' tokens); other roles' writes are queued all the same.
const HeaderMove = "X-Ironflow-Move"

// WriteRequest is the Payload of an OperationWrite: the request as it is replayed, and who
// made it.
type WriteRequest struct {
	Method string `json:"Method"`
	Path   string `json:"Path"`  // escaped, under PathPrefix
	Query  string `json:"Query"` // raw query
	Body   string `json:"Body"`  // the JSON body as sent
	User   string `json:"User"`
	Role   string `json:"Role"`
}

// QueuedWrite is the 202 answer to a write queued for a paused rack. Its Location header
// addresses the operation (GET .../racks/{uuid}/operations/{id}).
type QueuedWrite struct {
	Operation PendingOperation `json:"Operation"`
	Rack      string           `json:"Rack"`     // UUID
	RackName  string           `json:"RackName"` // Name
	// Transfer is the run holding the rack (empty for a pause without one).
	Transfer RackHold `json:"Transfer"`
}
