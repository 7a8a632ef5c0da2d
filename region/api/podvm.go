package api

import "fmt"

// The VMs of pods as the pod workflows (workflows/pods.go) and the rack's pod activities
// (activities/rack/pods.go) carry them, and as rack/pods composes and powers them. They are
// recorded in workflow histories: their JSON never changes.

// PodVM asks for one VM on a pod.
type PodVM struct {
	Name        string    `json:"Name"`
	UUID        string    `json:"UUID"` // the domain's UUID; empty: a fresh one
	Arch        string    `json:"Arch"` // empty: the pod's own architecture
	Cores       int       `json:"Cores"`
	MemoryBytes uint64    `json:"MemoryBytes"`
	Disks       []PodDisk `json:"Disks"`
	NIC         PodNIC    `json:"NIC"`
}

// PodDisk is a volume carved from a named storage pool.
type PodDisk struct {
	Pool      string `json:"Pool"`
	SizeBytes uint64 `json:"SizeBytes"`
}

// PodNIC attaches the VM to a host bridge or to a libvirt network (exactly one of them).
type PodNIC struct {
	Bridge  string `json:"Bridge"`
	Network string `json:"Network"`
	MAC     string `json:"MAC"` // empty: libvirt picks one
}

// ComposedVM is a VM that a compose defined on its pod.
type ComposedVM struct {
	Name    string      `json:"Name"`
	UUID    string      `json:"UUID"`
	MAC     string      `json:"MAC"`
	Volumes []PodVolume `json:"Volumes"`
}

// PodVolume is one disk of a composed VM.
type PodVolume struct {
	Pool string `json:"Pool"`
	Name string `json:"Name"`
}

func (v PodVolume) String() string { return v.Pool + "/" + v.Name }

// PowerAction is what `machines power` asks of a pod VM, and a pod VM's power state (on or off).
type PowerAction string

// The power actions. Off is a hard stop (a pulled plug, as for a bare-metal BMC); a VM being
// decomposed or re-commissioned must not wait for its guest to agree.
const (
	PowerOn    PowerAction = "on"
	PowerOff   PowerAction = "off"
	PowerCycle PowerAction = "cycle"
)

// ParsePowerAction checks an action named by a user.
func ParsePowerAction(s string) (PowerAction, error) {
	switch a := PowerAction(s); a {
	case PowerOn, PowerOff, PowerCycle:
		return a, nil
	}
	return "", fmt.Errorf("power action %q: want on, off or cycle", s)
}
