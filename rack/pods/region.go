package pods

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// DefaultSocket is where libvirt's system instance listens on a host.
const DefaultSocket = "/run/libvirt/libvirt-sock"

// Dial connects to the pod at powerAddress, a libvirt URI. Only this host's system instance is
// reachable yet: qemu:///system, or qemu:///system?socket=PATH for a daemon on another socket.
func Dial(powerAddress string, timeout time.Duration) (*Conn, error) {
	u, err := url.Parse(powerAddress)
	if err != nil {
		return nil, fmt.Errorf("pod address %q: %w", powerAddress, err)
	}
	switch {
	case u.Scheme == "qemu+ssh":
		return nil, fmt.Errorf("pod address %q: libvirt over SSH is not supported yet; use qemu:///system on the pod's host", powerAddress)
	case u.Scheme != "qemu" || u.Host != "" || u.Path != "/system":
		return nil, fmt.Errorf("pod address %q: want qemu:///system[?socket=PATH]", powerAddress)
	}
	socket := u.Query().Get("socket")
	if socket == "" {
		socket = DefaultSocket
	}
	return DialUnix(socket, timeout)
}

// RegionPatch is the JSON merge patch that stores the facts on the region's pod in one update,
// so its facts are never half from one refresh and half from another. Its capacity fields are
// the hypervisor's: Cores, MemoryMiB and StorageGiB (the pools' capacity, rounded down).
func (f Facts) RegionPatch() (json.RawMessage, error) {
	pools := make([]api.PodStoragePool, len(f.StoragePools))
	var capacity uint64
	for i, sp := range f.StoragePools {
		pools[i] = api.PodStoragePool(sp)
		capacity += sp.CapacityBytes
	}
	nets := make([]api.PodNetwork, len(f.Networks))
	for i, n := range f.Networks {
		nets[i] = api.PodNetwork(n)
	}
	// A map, not api.Pod: a merge patch names only the fields it changes, and empty lists
	// must replace stale ones rather than vanish under omitempty.
	patch, err := json.Marshal(map[string]any{
		"Arch": f.Arch, "Cores": f.Cores, "MemoryMiB": f.MemoryBytes >> 20, "StorageGiB": capacity >> 30,
		"StoragePools": pools, "Networks": nets,
	})
	if err != nil {
		return nil, fmt.Errorf("pod facts: %w", err)
	}
	return patch, nil
}
