package pods

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/region/api"
)

// sshPod is a real libvirtd behind a real sshd that forwards its socket, as a pod host reached
// with qemu+ssh.
func sshPod(t *testing.T) (SSH, string) {
	t.Helper()
	p := startPod(t)
	return sshTo(t, p.socket), p.pool
}

// sshTo is a real sshd on loopback that forwards the libvirt socket, as a pod host reached with qemu+ssh.
func sshTo(t *testing.T, socket string) SSH {
	t.Helper()
	srv := sshdtest.Start(t, t.TempDir())
	signer := sshdtest.NewSigner(t)
	srv.Authorize(t, signer, "rack")
	return SSH{Addr: srv.Addr, User: "root", Signer: signer, HostKey: srv.HostKey, Socket: socket}
}

func TestOverSSHDiscoverComposeDecompose(t *testing.T) {
	s, pool := sshPod(t)
	conn, err := DialSSH(s, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	facts, err := conn.Discover()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(facts.StoragePools, func(sp StoragePool) bool { return sp.Name == pool && sp.CapacityBytes > 0 }) {
		t.Fatalf("pool %s not discovered over SSH: %+v", pool, facts.StoragePools)
	}
	name := uniqueName()
	if _, err := conn.Compose(api.PodVM{Name: name, Cores: 1, MemoryBytes: 128 << 20, Disks: []api.PodDisk{{Pool: pool, SizeBytes: 1 << 30}}, NIC: api.PodNIC{Bridge: "br0"}}); err != nil {
		t.Fatal(err)
	}
	if err := conn.Decompose(name); err != nil {
		t.Fatal(err)
	}
	p := pod{conn: conn, pool: pool}
	if p.hasDomain(t, name) || len(p.volumes(t)) != 0 {
		t.Errorf("left after decompose over SSH: domain %v, volumes %v", p.hasDomain(t, name), p.volumes(t))
	}
}

func TestOverSSHAWrongHostKeyIsRefused(t *testing.T) {
	s, _ := sshPod(t)
	s.HostKey = sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "impostor")
	conn, err := DialSSH(s, 10*time.Second)
	if err == nil {
		conn.Close()
		t.Fatal("connected with the wrong host key")
	}
	if !errors.Is(err, ErrHostKeyMismatch) {
		t.Errorf("error %v, want ErrHostKeyMismatch", err)
	}
}
