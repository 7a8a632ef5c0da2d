package pods

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ironflow/ironflow/region/api"
)

// DefaultSocket is where libvirt's system instance listens on a host.
const DefaultSocket = "/run/libvirt/libvirt-sock"

// Dialer reaches the pods of a rack at their PowerAddress, a libvirt URI:
//
//	qemu:///system[?socket=PATH]                      the daemon on the rack's own host
//	qemu+ssh://user@host[:port]/system[?socket=PATH]  through the host's SSH server, as virsh does
//
// Over SSH the rack authenticates with its own key (SSHKey, from the rack's configuration;
// never stored in the region) and accepts only the host key recorded on the pod (Pod.HostKey).
type Dialer struct {
	SSHKey  ssh.Signer // nil: qemu+ssh pods are refused
	Timeout time.Duration
}

// Dial connects to pod. An address it cannot use is an ErrRefused error.
func (d Dialer) Dial(pod api.Pod) (*Conn, error) {
	u, err := parseAddress(pod)
	if err != nil {
		return nil, err
	}
	socket := socketOf(u)
	switch {
	case u.Scheme == "qemu" && u.Host == "" && u.Path == "/system":
		return DialUnix(socket, d.Timeout)
	case u.Scheme == "qemu+ssh" && u.Host != "" && u.Path == "/system":
		s, err := d.ssh(pod, u, socket)
		if err != nil {
			return nil, refuse(err)
		}
		return DialSSH(s, d.Timeout)
	}
	return nil, refuse(fmt.Errorf("pod %s address %q: want qemu:///system or qemu+ssh://user@host[:port]/system (with an optional ?socket=PATH)", pod.Name, pod.PowerAddress))
}

func parseAddress(pod api.Pod) (*url.URL, error) {
	u, err := url.Parse(pod.PowerAddress)
	if err != nil {
		return nil, refuse(fmt.Errorf("pod %s address %q: %w", pod.Name, pod.PowerAddress, err))
	}
	return u, nil
}

// socketOf is the daemon's socket an address names (?socket=PATH), else DefaultSocket.
func socketOf(u *url.URL) string {
	if s := u.Query().Get("socket"); s != "" {
		return s
	}
	return DefaultSocket
}

// ssh reads the SSH side of a qemu+ssh address.
func (d Dialer) ssh(pod api.Pod, u *url.URL, socket string) (SSH, error) {
	if d.SSHKey == nil {
		return SSH{}, fmt.Errorf("pod %s is reached over SSH, and the rack has no SSH key (rack serve --pod-ssh-key)", pod.Name)
	}
	if pod.HostKey == "" {
		return SSH{}, fmt.Errorf("pod %s is reached over SSH and records no HostKey: set it to the host's public key (ssh-keyscan HOST)", pod.Name)
	}
	user := "root"
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "22")
	}
	return SSH{Addr: addr, User: user, Signer: d.SSHKey, HostKey: pod.HostKey, Socket: socket}, nil
}

// LoadSSHKey reads the rack's private key for qemu+ssh pods (OpenSSH or PEM format, without
// a passphrase).
func LoadSSHKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pod SSH key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("pod SSH key %s: %w", path, err)
	}
	return s, nil
}

// Region is the facts as the region stores them (api.PodFacts): capacity as Cores, MemoryMiB
// and StorageGiB (the pools' capacity, rounded down), the pools and networks.
func (f Facts) Region() api.PodFacts {
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
	return api.PodFacts{
		Arch: f.Arch, Cores: f.Cores, MemoryMiB: int(f.MemoryBytes >> 20), StorageGiB: int(capacity >> 30),
		StoragePools: pools, Networks: nets,
	}
}
