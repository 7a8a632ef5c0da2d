package api

import "time"

// Enlistment: a machine that boots unknown reports what it is, and the region creates it in
// the New state or matches it to a machine an operator declared.
//
//	POST /api/v1/enlist                         Enlistment -> EnlistResult (roles rack, operator, admin)
//	GET|POST|... /api/v1/commissioning-scripts  the CommissioningScript kind (generic CRUD)
//
// Racks forward what iPXE reports (GET /ipxe/enlist on the rack) and what `ironflow agent
// enlist` sends from the discovery environment (POST /api/v1/enlist on the rack, no
// credential) with their own token; an operator may enlist directly. A report is matched by
// every identity it carries: its MACs, SMBIOS UUID and serial (Fingerprint.SystemUUID,
// Fingerprint.SSNHash) and BMC address. No match creates a machine in the New state. One
// match records the report on it, but never its MACs or identities: those the machine lacks
// become Enlisted.Pending for an operator to accept. A report that carries one of the
// machine's MACs records its boot facts and inventory (making it Ready); one that matched by
// another identity alone only fills in what the machine has not recorded. A report whose
// identities belong to several machines (but a New placeholder iPXE's report created and a
// machine being commissioned, matched by its BMC address alone: the placeholder is folded
// into it), or contradict the matched machine's, or that brings
// an inventory for a machine already Ready (an operator sets Status back to New to commission
// it again) by one of its MACs, or that would hold more than MaxEnlistPending pending
// identities, is refused (409) with an "enlist-refused" audit event and changes nothing.
// Reports are rate-limited per rack, and creating a machine is refused (429 with
// Retry-After) while the region holds its most New machines.

// CommissioningScript is a script the discovery environment runs on every enlisting machine;
// its output is recorded in the machine's Inventory.
type CommissioningScript struct {
	Name           string            `json:"Name"`
	Description    string            `json:"Description"`
	Script         string            `json:"Script"` // run with /bin/sh -c
	TimeoutSeconds int               `json:"TimeoutSeconds"`
	Meta           map[string]string `json:"Meta"`
}

// KernelParamURL is the kernel parameter the rack adds to the discovery environment's
// command line: its own URL, where `ironflow agent enlist` reports.
const KernelParamURL = "ironflow.url"

// KernelParamProxy is the kernel parameter the rack adds to what it boots while it serves
// the machines' HTTP proxy: the proxy's URL, which the commissioning scripts of `ironflow
// agent enlist` get as http_proxy and https_proxy.
const KernelParamProxy = "ironflow.proxy"

// KernelParamSyslog is the kernel parameter the rack adds to the discovery environment's
// command line when it receives syslog: its address, HOST:PORT, where the environment sends
// its console.
const KernelParamSyslog = "ironflow.syslog"

// Machine statuses set by enlistment.
const (
	StatusNew   = "New"   // enlisted, not commissioned yet
	StatusReady = "Ready" // commissioned: its inventory is recorded
)

// EnlistStage is the Stage and BootEnv of a machine enlistment created: the discovery
// environment, as in Digital Rebar.
const EnlistStage = "discovery"

// Bounds of an enlistment report.
const (
	MaxEnlistValue      = 128     // bytes of one reported identity or fact
	MaxEnlistMACs       = 64      // interfaces of one machine
	MaxCommissioning    = 32      // scripts run in one enlistment
	MaxCommissionOutput = 8 << 10 // bytes of one script's output (its tail is kept)
	MaxEnlistPending    = 64      // Enlisted.Pending of one machine
)

// Enlistment is one report of a booting machine.
type Enlistment struct {
	// Boot is what iPXE knew; the rack sets Rack.
	Boot *BootFacts `json:"Boot,omitempty"`
	// Inventory and Commissioning are what the discovery environment found.
	Inventory     *Inventory            `json:"Inventory,omitempty"`
	Commissioning []CommissioningResult `json:"Commissioning,omitempty"`
}

// BootFacts are the iPXE settings ${mac}, ${uuid}, ${serial}, ${manufacturer}, ${product},
// ${buildarch} and ${platform} of the booting interface.
type BootFacts struct {
	MAC          string `json:"MAC"`
	UUID         string `json:"UUID"`
	Serial       string `json:"Serial"`
	Manufacturer string `json:"Manufacturer"`
	Product      string `json:"Product"`
	BuildArch    string `json:"BuildArch"`
	Platform     string `json:"Platform"`
	Rack         string `json:"Rack"` // UUID of the rack it booted from
}

// Inventory is the hardware of a machine as its discovery environment saw it.
type Inventory struct {
	Hostname   string         `json:"Hostname"`
	Arch       string         `json:"Arch"` // GOARCH of the discovery environment
	Interfaces []NetInterface `json:"Interfaces"`
	CPU        CPU            `json:"CPU"`
	MemoryMiB  int64          `json:"MemoryMiB"`
	Disks      []Disk         `json:"Disks"`
	SMBIOS     SMBIOS         `json:"SMBIOS"`
	BMCAddress string         `json:"BMCAddress"` // from `ipmitool lan print`, when present
}

// NetInterface is one network interface with a MAC.
type NetInterface struct {
	Name  string   `json:"Name"`
	MAC   string   `json:"MAC"`
	Addrs []string `json:"Addrs"`
}

// CPU is the processor summary.
type CPU struct {
	Model string `json:"Model"`
	Count int    `json:"Count"` // logical CPUs
}

// Disk is one block device.
type Disk struct {
	Name      string `json:"Name"`
	SizeBytes int64  `json:"SizeBytes"`
	Model     string `json:"Model"`
	Serial    string `json:"Serial,omitempty"` // the device's own, where the kernel shows it
}

// SMBIOS is what /sys/class/dmi/id shows (serial and UUID only when readable, i.e. as root).
type SMBIOS struct {
	Manufacturer string `json:"Manufacturer"`
	Product      string `json:"Product"`
	Serial       string `json:"Serial"`
	UUID         string `json:"UUID"`
	BIOSVendor   string `json:"BIOSVendor"`
	BIOSVersion  string `json:"BIOSVersion"`
}

// CommissioningResult is one commissioning script's run.
type CommissioningResult struct {
	Script    string `json:"Script"`
	ExitCode  int    `json:"ExitCode"`
	Output    string `json:"Output"`    // at most MaxCommissionOutput bytes, the tail
	Truncated bool   `json:"Truncated"` // the script wrote more than Output holds
}

// Enlisted is what a machine's record keeps of its enlistment (Machine.Enlisted).
type Enlisted struct {
	Boot          *BootFacts            `json:"Boot,omitempty"`
	Inventory     *Inventory            `json:"Inventory,omitempty"`
	Commissioning []CommissioningResult `json:"Commissioning,omitempty"`
	Time          time.Time             `json:"Time"` // of the last report
	// Pending are the MACs and identities reports claimed for this machine that it does not
	// hold: a report carries no credential, so it never gives a known machine a MAC (which
	// its reservation follows) or an identity. An operator accepts one by writing it into
	// the machine (HardwareAddrs, Fingerprint, BMCAddress), which drops it from here, and
	// clears the rest with {"Enlisted": {"Pending": null}}. At most MaxEnlistPending.
	Pending []PendingIdentity `json:"Pending,omitempty"`
}

// PendingIdentity is a MAC or identity a report claimed for a machine (Enlisted.Pending).
type PendingIdentity struct {
	Kind  string    `json:"Kind"`  // Identity…
	Value string    `json:"Value"` // canonical: a MAC as 52:54:00:…, a serial as its SSNHash
	By    string    `json:"By"`    // who sent the report: rack:<uuid> for one a rack forwarded
	Time  time.Time `json:"Time"`  // of the first report that claimed it
}

// Kinds of machine identity, in PendingIdentity.Kind and the region's audit events.
const (
	IdentityMAC        = "mac"         // HardwareAddrs
	IdentitySystemUUID = "system-uuid" // Fingerprint.SystemUUID
	IdentitySerial     = "serial"      // Fingerprint.SSNHash
	IdentityBMC        = "bmc"         // BMCAddress
)

// EnlistResult says what a report did.
type EnlistResult struct {
	Machine string `json:"Machine"` // UUID
	Name    string `json:"Name"`
	Created bool   `json:"Created"` // a New machine; false: matched an existing one
	Status  string `json:"Status"`
}
