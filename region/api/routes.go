package api

// The region API. Every path is under /api/v1 unless noted. Objects are addressed by
// "{key}": a UUID, a Name for name-keyed kinds (profiles, pools, users), or "Field:value"
// (for example "Name:birdy", "HardwareAddrs:52:54:00:12:34:56").
//
//	GET    /healthz, /metrics                         (no auth)
//	GET    /api/v1/info                               Info (no auth)
//	GET    /api/v1/{kind}?Field=value&...             list, DRP-style filters, "offset"/"limit" (paged, see DefaultPageSize)
//	POST   /api/v1/{kind}                             create (201, body = created object)
//	GET    /api/v1/{kind}/{key}                       show
//	PUT    /api/v1/{kind}/{key}                       replace
//	PATCH  /api/v1/{kind}/{key}                       merge patch (RFC 7386)
//	DELETE /api/v1/{kind}/{key}?force=true            delete (force only where a dependency may be overridden)
//	GET    /api/v1/jobs/{key}/log                     job log as text/plain
//	PUT    /api/v1/jobs/{key}/log                     append text to the job log
//	POST   /api/v1/users/{name}/token                 TokenRequest -> Token (minted once)
//	GET    /api/v1/events?Kind=...&Key=...            audit log (newest first)
//	GET    /api/v1/machines/{key}/logs                a machine's syslog (syslog.go; racks post it)
//
// Kinds served by the generic CRUD routes.
const (
	KindMachines = "machines"
	KindJobs     = "jobs"
	KindProfiles = "profiles"
	KindPools    = "pools"
	KindPods     = "pods"
	KindFabrics  = "fabrics"
	KindVLANs    = "vlans"
	KindSubnets  = "subnets"
	KindLeases   = "leases"
	KindRacks    = "racks"
	KindUsers    = "users"

	KindCommissioningScripts = "commissioning-scripts" // CommissioningScript, see enlist.go
)

// PathPrefix is the prefix of every versioned API path.
const PathPrefix = "/api/v1"

// Paging of list calls (kinds and events): a list answers at most "limit" objects
// (DefaultPageSize when absent, at most MaxPageSize) from "offset" on; when more follow, the
// answer's HeaderNext holds the offset of the next page.
const (
	DefaultPageSize = 1000
	MaxPageSize     = 5000
	HeaderNext      = "X-Ironflow-Next"
)
