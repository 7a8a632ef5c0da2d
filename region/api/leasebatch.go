package api

// LeaseBatchResult is the region's answer to a rack's lease batch
// (POST /api/v1/racks/{uuid}/leases): how many leases it stored, and the ones it refused
// individually, so that one invalid record does not hold back the rest of the batch.
type LeaseBatchResult struct {
	Stored   int              `json:"Stored"`
	Rejected []LeaseRejection `json:"Rejected"`
}

// LeaseRejection is one lease of a batch the region did not store, and why.
type LeaseRejection struct {
	Index int    `json:"Index"` // position in the posted batch
	IP    string `json:"IP"`
	MAC   string `json:"MAC"`
	Error string `json:"Error"`
}
