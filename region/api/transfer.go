package api

// Rack transfer endpoints, used by the TransferRack workflow. The source exports what moves
// with a rack besides its machines (those move one by one as machine migrations); the target
// checks and imports it.
//
//	POST   /api/v1/racks/{uuid}/pause                -> Rack (source: Status "paused")
//	POST   /api/v1/racks/{uuid}/unpause              -> Rack (Status follows heartbeats again)
//	GET    /api/v1/racks/{uuid}/export               -> RackBundle (source)
//	POST   /api/v1/racks/import/check                RackBundle -> TransferCheck (target: conflicts, changes nothing)
//	POST   /api/v1/racks/import                      RackBundle -> RackImport (target: idempotent upserts by UUID)
//	DELETE /api/v1/racks/{uuid}/import               (target: deletes what imports of the rack created; compensation)
//	POST   /api/v1/racks/{uuid}/hand-over            (source: drops the network the rack alone serves and its pods, then deletes the rack without force)
//	GET    /api/v1/racks/{uuid}/operations           -> []PendingOperation (unreleased, for the rack and its machines)
//	POST   /api/v1/racks/{uuid}/operations           PendingOperation -> PendingOperation (queued; only while the rack is paused; no Kind "write"; 64 KiB)
//	GET    /api/v1/racks/{uuid}/operations/{id}      -> PendingOperation (released or not; a queued write with its Outcome)
//	POST   /api/v1/racks/{uuid}/operations/release   OperationsRelease -> []PendingOperation (marked released; the move's only)
//
// What records, changes or ends a transfer's hold (pause naming a RackHold, unpause,
// import, undo of the import and hand-over of a held rack, recover, release) is refused
// (403) unless the call is the move's (queue.go, HeaderMove).
//
// An ordinary write (POST, PUT, PATCH, DELETE of the generic kind routes; a machine's secrets
// and ad-hoc scripts) that touches a paused rack, its machines and their jobs, its pods, its
// VLANs, their subnets and leases, is queued rather than applied and answered 202 Accepted
// with a QueuedWrite (queue.go).
//
// A rack may be transferred only when no other rack serves its VLANs (export refuses with
// 409 and names the shared VLANs).

// RackBundle is everything that moves with a rack besides its machines.
type RackBundle struct {
	Rack     Rack          `json:"Rack"`
	Fabrics  []Fabric      `json:"Fabrics"`
	VLANs    []VLAN        `json:"VLANs"`   // the VLANs the rack serves (primary, no secondary)
	Subnets  []Subnet      `json:"Subnets"` // their subnets, with DHCP settings and reserved IPs
	Pods     []Pod         `json:"Pods"`    // the pods the rack hosts
	Pools    []Pool        `json:"Pools"`   // the pools of those pods and of the rack's machines
	Leases   []Lease       `json:"Leases"`  // the leases of those subnets
	Machines []RackMachine `json:"Machines"`
	// Hold is the transfer run that imports the bundle, recorded as the target's hold of the
	// rack (transfer_recovery.go); the source's export leaves it empty.
	Hold *RackHold `json:"Hold,omitempty"`
}

// RackMachine identifies a machine behind a rack, for the target's conflict check.
type RackMachine struct {
	Uuid          string    `json:"Uuid"`
	Name          string    `json:"Name"`
	HardwareAddrs []string  `json:"HardwareAddrs"`
	Address       string    `json:"Address,omitempty"` // unique in a region, like the MACs
	Image         *ImageRef `json:"Image,omitempty"`   // the image it is deployed with, which the target must hold
}

// TransferCheck lists what on the target conflicts with a bundle; empty means it can import.
type TransferCheck struct {
	Conflicts []string `json:"Conflicts"`
}

// RackImport counts what an import stored, and how many objects it created (the rest
// already existed with the same UUID, from an earlier attempt).
type RackImport struct {
	Fabrics int `json:"Fabrics"`
	VLANs   int `json:"VLANs"`
	Subnets int `json:"Subnets"`
	Pods    int `json:"Pods"`
	Leases  int `json:"Leases"`
	Created int `json:"Created"`
}

// OperationsRelease releases a rack's queued operations. Operations are those another
// region (Origin, its name) queued for the rack, handed over with it: they are stored once
// (by Origin and ID), with the QueuedBy and QueuedRole Origin recorded, and released here
// together with the local queue. One release carries at most what a rack's queue holds
// (MaxQueuedOperations, MaxQueuedBytes; 413 beyond).
type OperationsRelease struct {
	Origin     string             `json:"Origin"`
	Operations []PendingOperation `json:"Operations"`
}
