package api

import "time"

// Rack controller endpoints on the region.
//
//	POST /api/v1/racks/register           RackRegistration -> RackRegistered
//	     Authorization: Bearer <the region's rack secret> (IRONFLOW_RACK_SECRET, or minted at
//	     first start and shown by `ironflow racks secret` / GET /api/v1/racks/secret, admin only).
//	     Registering again with the same Uuid is idempotent and returns a fresh token.
//	GET  /api/v1/racks/{uuid}/config      -> RackConfig, with an ETag; If-None-Match -> 304.
//	     ?wait=25s (at most 60s) makes a request whose If-None-Match matches a long poll: it is
//	     answered when the config changes, else with 304 after the wait. A rack has at most
//	     two long polls waiting; more are answered at once.
//	POST /api/v1/racks/{uuid}/heartbeat   RackHeartbeat -> Rack (LastSeen and Status updated)
//	POST /api/v1/racks/{uuid}/leases      []Lease -> LeaseSyncResult (batch upsert by Subnet+Addr;
//	     invalid leases are refused one by one in Rejected, the rest are stored; a lease's
//	     MachineRef, when set, must be the machine that has its MAC)
//
// A rack drives the KVM pods it hosts (Pod.Rack) and writes what that changes through three
// calls, each one transaction, refused (403) for a pod of another rack:
//
//	PUT    /api/v1/racks/{uuid}/pods/{pod}/facts           PodFacts -> Pod (a refresh)
//	POST   /api/v1/racks/{uuid}/pods/{pod}/vms             Machine -> Machine: a composed VM declared as a
//	       machine (its Pod and Rack set) and added to the pod's VMs; declaring the same Uuid again
//	       for the same pod answers the machine as it is. The Machine holds what a compose
//	       produces only (Uuid, Name, one MAC in HardwareAddrs, Fingerprint.SystemUUID equal to
//	       Uuid, Status New): any other field set is 422; a Name an operator's DNS record owns
//	       in the default domain is 409
//	DELETE /api/v1/racks/{uuid}/pods/{pod}/vms/{machine}   a decomposed VM's machine deleted and removed
//	       from the pod's VMs; one already gone is not an error
//
// Calls after registration use the rack's token (role rack, user "rack:<uuid>").
// A rack's Status is derived: "online" when seen within 3 heartbeat intervals, "degraded" when
// its heartbeat says so, "offline" otherwise, "paused" while a transfer holds it.

// RackRegistration is what a rack sends to join a region.
type RackRegistration struct {
	Uuid       string   `json:"Uuid"` // empty on first registration
	Name       string   `json:"Name"`
	Interfaces []string `json:"Interfaces"`
	Version    string   `json:"Version"`
}

// RackRegistered is the region's answer: the rack's identity, its token, and the region's cluster.
type RackRegistered struct {
	Rack   Rack   `json:"Rack"`
	Token  string `json:"Token"`
	Region Info   `json:"Region"`
}

// RackSecret is the shared secret racks register with.
type RackSecret struct {
	Secret string `json:"Secret"`
}

// Reservation is a fixed address for a known machine.
type Reservation struct {
	MAC      string `json:"MAC"`
	Addr     string `json:"Addr"`
	Hostname string `json:"Hostname"`
	Machine  string `json:"Machine"` // machine UUID
	Subnet   string `json:"Subnet"`  // subnet UUID
	BootEnv  string `json:"BootEnv"` // "local" boots from disk
}

// RackConfig is everything a rack needs to serve without its region: the subnets of the
// VLANs it serves DHCP for, reservations for their machines, and the machines' boot settings.
type RackConfig struct {
	Rack         Rack          `json:"Rack"`
	VLANs        []VLAN        `json:"VLANs"`
	Subnets      []Subnet      `json:"Subnets"`
	Reservations []Reservation `json:"Reservations"`
	Leases       []Lease       `json:"Leases"` // active leases of other racks the region knows, so a new or moved rack honours them
	DNS          RackDNS       `json:"DNS"`
	Proxy        RackProxy     `json:"Proxy"`
}

// ProxyPath holds the region's RackProxy settings, sent to every rack in its config.
//
//	GET /api/v1/proxy  -> RackProxy (every role but machine)
//	PUT /api/v1/proxy  RackProxy -> RackProxy (operator, admin): Parent an http://host:port
//	    URL or "", at most 64 distinct ConnectPorts, CacheBytes 0 (default), -1 (none) or a size
const ProxyPath = PathPrefix + "/proxy"

// RackProxy is what the region decides of its racks' HTTP proxy for machines (port 8000).
// Its zero value is the default: enabled, direct, CONNECT to 443, DefaultProxyCacheBytes.
type RackProxy struct {
	Disabled bool `json:"Disabled"`
	// Parent is the site proxy ("http://host:port") the racks send every request through;
	// "" connects directly.
	Parent       string `json:"Parent"`
	ConnectPorts []int  `json:"ConnectPorts"` // the ports CONNECT may reach; empty: 443
	CacheBytes   int64  `json:"CacheBytes"`   // the disk cache of each rack; 0: DefaultProxyCacheBytes, negative: none
}

// DefaultProxyCacheBytes is a rack's proxy cache when the region names no size.
const DefaultProxyCacheBytes = 10 << 30

// RackHeartbeat is sent by a rack every interval.
type RackHeartbeat struct {
	Version       string `json:"Version"`
	Degraded      bool   `json:"Degraded"`
	Reason        string `json:"Reason"`
	ActiveLeases  int    `json:"ActiveLeases"`
	CurrentRegion string `json:"CurrentRegion"`
}

// LeaseSyncResult says how many leases of a batch the region stored and which it refused.
// A refused lease is refused for good (it is malformed, or names an address the rack does not
// serve): the rack drops it rather than sending it again.
type LeaseSyncResult struct {
	Stored   int              `json:"Stored"`
	Rejected []LeaseRejection `json:"Rejected,omitempty"`
}

// LeaseRejection is one lease of a batch the region refused, by its 0-based Index in the batch.
type LeaseRejection struct {
	Index int    `json:"Index"`
	IP    string `json:"IP"`
	MAC   string `json:"MAC"`
	Error string `json:"Error"`
}

// RackHeartbeatInterval is how often racks report; the region derives Status from it.
const RackHeartbeatInterval = 10 * time.Second
