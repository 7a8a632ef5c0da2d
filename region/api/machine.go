// Package api holds the wire types shared by the region server and its clients.
// Field names follow Digital Rebar's objects so DRP users recognise them.
package api

import "encoding/json"

// Fingerprint identifies the hardware of a machine independently of its MACs.
type Fingerprint struct {
	CSNHash         string   `json:"CSNHash"`
	CloudInstanceID string   `json:"CloudInstanceID"`
	MemoryIds       []string `json:"MemoryIds"`
	SSNHash         string   `json:"SSNHash"`
	SystemUUID      string   `json:"SystemUUID"`
}

// Machine is a bare-metal host known to a region.
type Machine struct {
	Address           string            `json:"Address"`
	Arch              string            `json:"Arch"`
	Available         bool              `json:"Available"`
	BootEnv           string            `json:"BootEnv"`
	Bundle            string            `json:"Bundle"`
	Context           string            `json:"Context"`
	CurrentJob        string            `json:"CurrentJob"`
	CurrentTask       int               `json:"CurrentTask"`
	Description       string            `json:"Description"`
	Endpoint          string            `json:"Endpoint"`
	Errors            []string          `json:"Errors"`
	Fingerprint       Fingerprint       `json:"Fingerprint"`
	HardwareAddrs     []string          `json:"HardwareAddrs"`
	Locked            bool              `json:"Locked"`
	Meta              map[string]string `json:"Meta"`
	Name              string            `json:"Name"`
	OS                string            `json:"OS"`
	Params            map[string]any    `json:"Params"`
	Partial           bool              `json:"Partial"`
	PendingWorkOrders int               `json:"PendingWorkOrders"`
	Pool              string            `json:"Pool"`
	PoolAllocated     bool              `json:"PoolAllocated"`
	PoolStatus        string            `json:"PoolStatus"`
	Profiles          []string          `json:"Profiles"`
	ReadOnly          bool              `json:"ReadOnly"`
	RetryTaskAttempt  int               `json:"RetryTaskAttempt"`
	Runnable          bool              `json:"Runnable"`
	RunningWorkOrders int               `json:"RunningWorkOrders"`
	Secret            string            `json:"Secret"`
	Stage             string            `json:"Stage"`
	TaskErrorStacks   []json.RawMessage `json:"TaskErrorStacks"`
	Tasks             []string          `json:"Tasks"`
	Uuid              string            `json:"Uuid"`
	Validated         bool              `json:"Validated"`
	WorkOrderMode     bool              `json:"WorkOrderMode"`
	Workflow          string            `json:"Workflow"`
	WorkflowComplete  bool              `json:"WorkflowComplete"`

	// Ironflow additions: where the machine sits. Omitted when empty so a machine prints
	// exactly as in Digital Rebar.
	Rack   string `json:"Rack,omitempty"`
	Pod    string `json:"Pod,omitempty"`
	Region string `json:"Region,omitempty"`

	// Enlistment (region/api/enlist.go): Status New or Ready, the BMC an operator may declare
	// the machine by, and what its enlistment reported.
	Status string `json:"Status,omitempty"`
	// StatusReason says why Status is StatusFailedCommissioning (region/api/commission.go).
	StatusReason string    `json:"StatusReason,omitempty"`
	BMCAddress   string    `json:"BMCAddress,omitempty"`
	Enlisted     *Enlisted `json:"Enlisted,omitempty"`

	// Power is the machine's power driver and last seen power state (region/api/power.go).
	Power *PowerInfo `json:"Power,omitempty"`

	// Image is the OS image the machine is deployed with (region/api/image.go): a move
	// refuses a target region that lacks it.
	Image *ImageRef `json:"Image,omitempty"`
}

// Meta keys with a meaning to Ironflow.
const (
	MetaRedirectEndpoint = "redirect-endpoint" // set on a migrated stub and its jobs
	MetaMigrating        = "migrating"         // set while a migration quiesces the machine
)

// Normalize replaces nil collections with empty ones so JSON shows [] and {} as DRP does.
func (m *Machine) Normalize() {
	if m.Errors == nil {
		m.Errors = []string{}
	}
	if m.Fingerprint.MemoryIds == nil {
		m.Fingerprint.MemoryIds = []string{}
	}
	if m.HardwareAddrs == nil {
		m.HardwareAddrs = []string{}
	}
	if m.Meta == nil {
		m.Meta = map[string]string{}
	}
	if m.Params == nil {
		m.Params = map[string]any{}
	}
	if m.Profiles == nil {
		m.Profiles = []string{}
	}
	if m.TaskErrorStacks == nil {
		m.TaskErrorStacks = []json.RawMessage{}
	}
	if m.Tasks == nil {
		m.Tasks = []string{}
	}
}
