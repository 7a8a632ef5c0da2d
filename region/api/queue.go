package api

// Writes queued while a rack is paused (transfer.go). The region checks the caller's role and
// validates the write as it would now, then stores it as a PendingOperation of Kind
// OperationWrite for the rack (Target: the rack's UUID) instead of applying it, with the
// authenticated caller as QueuedBy and QueuedRole: nothing in a request body names who
// queued a write. When the rack's pause ends on the region that then owns it (the target
// after a transfer, the source when the transfer is undone), its queued writes are replayed
// there in order, each as its caller if that user still exists there and its role (of the
// moment) still permits the write; each is applied once (its ID is its idempotency key: the
// replay is settled in the transaction of the write itself, so a replay cut short by a crash
// runs again and applies nothing twice). A PUT or PATCH whose object has changed, in a field
// it sets, since it was queued (Base) is refused rather than overwriting the newer value. A
// write whose replay fails is settled with its error and audited, and the others still run.

// OperationWrite is the Kind of a queued API write; its Payload is a WriteRequest.
const OperationWrite = "write"

// Outcomes of a queued write (PendingOperation.Outcome); a failed replay has its error.
const (
	OutcomeApplied    = "applied"
	OutcomeHandedOver = "handed over"
	OutcomeReplaying  = "replaying" // claimed by a replay that has not settled it yet (run again if cut short)
	// OutcomeDropped: queued on a transfer's target for its copy of the rack, which the
	// undone transfer deleted.
	OutcomeDropped = "dropped: the rack's transfer was undone here"
)

// Limits of the queue, so that one client cannot fill a region's database or its memory.
// Released writes count until they are settled, handed-over ones included.
const (
	MaxQueuedOperations = 1000     // operations per rack not yet released or replayed (429 beyond)
	MaxQueuedWriteBody  = 64 << 10 // bytes of one queued write's body, or of one operation's Payload (413 beyond)
	MaxQueuedBytes      = 2 << 20  // bytes of Payload a rack's queue holds in all (429 beyond)
)

// HeaderMove marks a write as part of a move (the workers' region calls): it is applied even
// while its rack is paused, since the move itself is what holds the rack. Only an admin's mark
// counts (the workers' tokens); other roles' writes are queued all the same. The steps of a
// rack transfer that change or end a transfer's hold (a pause naming a run, the unpause or
// recovery of a held rack, the release of its queue) are the move's alone: without the mark
// they are refused (403) whatever the role.
const HeaderMove = "X-Ironflow-Move"

// WriteRequest is the Payload of an OperationWrite: the request as it is replayed. Who made it
// is the operation's QueuedBy and QueuedRole, recorded by the region.
type WriteRequest struct {
	Method string `json:"Method"`
	Path   string `json:"Path"`  // escaped, under PathPrefix
	Query  string `json:"Query"` // raw query
	Body   string `json:"Body"`  // the JSON body as sent
	// Base fingerprints, for a PUT or PATCH of an existing object, each top-level field the
	// write sets as it was when the write was queued, after the writes queued before it for
	// the same object (field name -> hex SHA-256 of its JSON value). The replay refuses the
	// write when one of those fields has another value by then.
	Base map[string]string `json:"Base,omitempty"`
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
