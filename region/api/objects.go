package api

import "time"

// Profile is a named set of params that machines reference.
type Profile struct {
	Available     bool              `json:"Available"`
	Bundle        string            `json:"Bundle"`
	Description   string            `json:"Description"`
	Documentation string            `json:"Documentation"`
	Endpoint      string            `json:"Endpoint"`
	Errors        []string          `json:"Errors"`
	Meta          map[string]string `json:"Meta"`
	Name          string            `json:"Name"`
	Params        map[string]any    `json:"Params"`
	Partial       bool              `json:"Partial"`
	Profiles      []string          `json:"Profiles"`
	ReadOnly      bool              `json:"ReadOnly"`
	Validated     bool              `json:"Validated"`
}

// Normalize replaces nil collections with empty ones.
func (p *Profile) Normalize() {
	if p.Errors == nil {
		p.Errors = []string{}
	}
	if p.Meta == nil {
		p.Meta = map[string]string{}
	}
	if p.Params == nil {
		p.Params = map[string]any{}
	}
	if p.Profiles == nil {
		p.Profiles = []string{}
	}
}

// Pool groups machines for allocation and bulk operations.
type Pool struct {
	Name        string            `json:"Name"`
	Description string            `json:"Description"`
	Meta        map[string]string `json:"Meta"`
}

// Pod is a KVM host that a rack controls.
type Pod struct {
	Uuid         string `json:"Uuid"`
	Name         string `json:"Name"`
	Type         string `json:"Type"`         // e.g. "virsh"
	PowerAddress string `json:"PowerAddress"` // qemu:///system[?socket=PATH] or qemu+ssh://user@host[:port]/system[?socket=PATH]
	// HostKey is the SSH host key of a qemu+ssh pod in authorized_keys format ("ssh-ed25519
	// AAAA..."): public, and required, so the rack never trusts a key on first use.
	HostKey    string            `json:"HostKey,omitempty"`
	Rack       string            `json:"Rack"` // rack UUID
	Pool       string            `json:"Pool"`
	Cores      int               `json:"Cores"`
	MemoryMiB  int               `json:"MemoryMiB"`
	StorageGiB int               `json:"StorageGiB"`
	VMs        []string          `json:"VMs"` // machine UUIDs
	Meta       map[string]string `json:"Meta"`

	// What the hypervisor reported at the last refresh (`ironflow pods refresh`), which also
	// sets Cores, MemoryMiB and StorageGiB (the pools' total capacity). Absent until then.
	Arch         string           `json:"Arch,omitempty"` // libvirt's name: x86_64, aarch64, ppc64le
	StoragePools []PodStoragePool `json:"StoragePools,omitempty"`
	Networks     []PodNetwork     `json:"Networks,omitempty"`
}

// PodFacts is what a refresh stores on a pod in one write (PUT
// /api/v1/racks/{uuid}/pods/{pod}/facts): the hypervisor's capacity and its pools and networks.
type PodFacts struct {
	Arch         string           `json:"Arch"`
	Cores        int              `json:"Cores"`
	MemoryMiB    int              `json:"MemoryMiB"`
	StorageGiB   int              `json:"StorageGiB"` // the pools' capacity, rounded down
	StoragePools []PodStoragePool `json:"StoragePools"`
	Networks     []PodNetwork     `json:"Networks"`
}

// PodStoragePool is one storage pool of a pod with its usage at the last refresh. Free space is
// AvailableBytes; used is AllocationBytes (on a pool sharing its filesystem, other files count too).
type PodStoragePool struct {
	Name            string `json:"Name"`
	Type            string `json:"Type"` // libvirt's pool type: dir, logical, netfs, ...
	Path            string `json:"Path"`
	Active          bool   `json:"Active"`
	CapacityBytes   uint64 `json:"CapacityBytes"`
	AllocationBytes uint64 `json:"AllocationBytes"`
	AvailableBytes  uint64 `json:"AvailableBytes"`
}

// PodNetwork is one virtual network of a pod.
type PodNetwork struct {
	Name   string `json:"Name"`
	Bridge string `json:"Bridge"`
	Active bool   `json:"Active"`
}

// StorageUsage sums the pod's storage pools: the per-pod used and free.
func (p Pod) StorageUsage() (capacity, used, free uint64) {
	for _, sp := range p.StoragePools {
		capacity += sp.CapacityBytes
		used += sp.AllocationBytes
		free += sp.AvailableBytes
	}
	return capacity, used, free
}

// Fabric is a layer-2 domain.
type Fabric struct {
	Uuid        string `json:"Uuid"`
	Name        string `json:"Name"`
	Description string `json:"Description"`
}

// VLAN belongs to a fabric; DHCP is served per VLAN by a primary (and optional secondary) rack.
type VLAN struct {
	Uuid          string `json:"Uuid"`
	Fabric        string `json:"Fabric"` // fabric UUID
	VID           int    `json:"VID"`
	Name          string `json:"Name"`
	MTU           int    `json:"MTU"`
	DHCPOn        bool   `json:"DHCPOn"`
	PrimaryRack   string `json:"PrimaryRack"`   // rack UUID or ""
	SecondaryRack string `json:"SecondaryRack"` // rack UUID or ""
}

// IPRange is an inclusive range of addresses.
type IPRange struct {
	Start string `json:"Start"`
	End   string `json:"End"`
}

// Subnet is an IPv4 network on a VLAN.
type Subnet struct {
	Uuid         string   `json:"Uuid"`
	Name         string   `json:"Name"`
	CIDR         string   `json:"CIDR"`
	VLAN         string   `json:"VLAN"` // VLAN UUID
	Gateway      string   `json:"Gateway"`
	DNSServers   []string `json:"DNSServers"`
	DynamicRange IPRange  `json:"DynamicRange"`
	ReservedIPs  []string `json:"ReservedIPs"`
	LeaseSeconds int      `json:"LeaseSeconds"`
	NextServer   string   `json:"NextServer"`
	// ProxyParent is the site proxy ("http://host:port") the racks' HTTP proxy sends this
	// subnet's machines' requests through, instead of the region's RackProxy.Parent.
	ProxyParent string    `json:"ProxyParent"`
	Created     time.Time `json:"Created"`
}

// Lease is a DHCP lease handed out by a rack.
type Lease struct {
	Addr       string    `json:"Addr"`
	MAC        string    `json:"MAC"`
	Subnet     string    `json:"Subnet"` // subnet UUID
	Rack       string    `json:"Rack"`   // rack UUID that granted it
	Hostname   string    `json:"Hostname"`
	State      string    `json:"State"` // "active", "released", "declined", "expired"
	Start      time.Time `json:"Start"`
	Expires    time.Time `json:"Expires"`
	MachineRef string    `json:"MachineRef"` // machine UUID when the MAC is known
}

// Rack is a rack controller registered with a region.
type Rack struct {
	Uuid            string            `json:"Uuid"`
	Name            string            `json:"Name"`
	RegionEndpoints []string          `json:"RegionEndpoints"`
	Interfaces      []string          `json:"Interfaces"`
	Status          string            `json:"Status"` // "online", "degraded", "offline", "paused"
	LastSeen        time.Time         `json:"LastSeen"`
	Version         string            `json:"Version"`
	Meta            map[string]string `json:"Meta"`
}

// Rack statuses.
const (
	RackOnline   = "online"
	RackDegraded = "degraded"
	RackOffline  = "offline"
	RackPaused   = "paused"
)

// User is an account that holds API tokens.
type User struct {
	Name    string    `json:"Name"`
	Role    string    `json:"Role"`
	Created time.Time `json:"Created"`
}

// Roles, from most to least privileged.
const (
	RoleAdmin    = "admin"
	RoleOperator = "operator"
	RoleReadonly = "readonly"
	RoleRack     = "rack"
	RoleMachine  = "machine"
)

// Roles lists every valid role.
var Roles = []string{RoleAdmin, RoleOperator, RoleReadonly, RoleRack, RoleMachine}

// TokenRequest asks the region to mint a token for a user.
type TokenRequest struct {
	Role string        `json:"Role"` // defaults to the user's role; may only narrow it
	TTL  time.Duration `json:"TTL"`  // 0 means no expiry
}

// Token is returned once when minted; only its hash is stored.
type Token struct {
	User    string    `json:"User"`
	Role    string    `json:"Role"`
	Token   string    `json:"Token"`
	Expires time.Time `json:"Expires"`
}

// Event is one entry of the audit log.
type Event struct {
	ID      int64          `json:"ID"`
	Time    time.Time      `json:"Time"`
	Actor   string         `json:"Actor"`
	Action  string         `json:"Action"` // "create", "update", "delete", ...
	Kind    string         `json:"Kind"`   // "machines", "jobs", ...
	Key     string         `json:"Key"`
	Details map[string]any `json:"Details"`
}

// PendingOperation is work queued while a rack or machine is paused.
type PendingOperation struct {
	ID       int64          `json:"ID"`
	Target   string         `json:"Target"` // machine or rack UUID
	Kind     string         `json:"Kind"`
	Payload  map[string]any `json:"Payload"`
	Created  time.Time      `json:"Created"`
	Released bool           `json:"Released"`
	// QueuedBy and QueuedRole are the authenticated caller who queued it, recorded by the
	// region that queued it (and handed over with it by the move); never taken from a body.
	QueuedBy   string `json:"QueuedBy"`
	QueuedRole string `json:"QueuedRole"`
	// Done is when a queued write (OperationWrite) was settled on this region: replayed, or
	// handed over with its rack to another region, or dropped with the copy of an undone
	// transfer. Outcome says which: OutcomeApplied, OutcomeHandedOver, OutcomeDropped, or the
	// error the replay was answered with; OutcomeReplaying (Done unset) while a replay that
	// has not settled it runs, or was cut short and is run again.
	Done    *time.Time `json:"Done,omitempty"`
	Outcome string     `json:"Outcome,omitempty"`
}

// Info describes a region and its cluster.
type Info struct {
	Name      string   `json:"Name"`
	Uuid      string   `json:"Uuid"`
	URL       string   `json:"URL"`
	Endpoints []string `json:"Endpoints"` // public URLs of all region processes of the cluster
	Version   string   `json:"Version"`
}

// Error is the body of every non-2xx API answer.
type Error struct {
	Error string `json:"Error"`
	Code  int    `json:"Code"`
	// Reason tells apart refusals a caller acts on differently (ReasonStaleAttempt).
	Reason string `json:"Reason,omitempty"`
}
