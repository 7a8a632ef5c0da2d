package rack

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/libvirtdtest"
	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/region/api"
)

// podVMBootTimeout bounds power-on to enlisted for a pod VM: libvirt starts QEMU (TCG, no KVM)
// whose iPXE ROM boots from the rack, on a loaded 2-core CI host; TestQEMUUnknownMachineEnlists
// measures the same boot without libvirt.
const podVMBootTimeout = 90 * time.Second

// TestPodVMsPXEBootAndEnlistOntoTheirMachines: a real libvirtd is a pod host on the rack's link
// (its bridge joins the client end of the rack's veth pair) with a dir storage pool. Two VMs are
// composed on it, one through libvirt's unix socket and one through a real sshd forwarding that
// socket (qemu+ssh), each declared on the region with its MAC and UUID as `pods compose` does,
// and powered on: each PXE-boots from the rack with its real iPXE and enlists onto its declared
// machine (no other machine appears). Each is then powered off and decomposed through the same
// connection, and libvirt has no domain and no volume left.
func TestPodVMsPXEBootAndEnlistOntoTheirMachines(t *testing.T) {
	ctx := context.Background()
	v := newEnlistingRack(t)

	// The pod host: the client namespace, its link to the rack on a bridge its VMs join.
	const bridge = "br0"
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"link", "set", v.cliIf, "master", bridge},
		{"link", "set", bridge, "up"},
	} {
		netnstest.IP(t, append([]string{"-n", v.cliNS}, args...)...)
	}
	dir := t.TempDir()
	socket := libvirtdtest.StartInNetNS(t, dir, v.cliNS)
	pool := "ironflow-pxe"
	libvirtdtest.DirPool(t, socket, pool, filepath.Join(dir, "pool"))
	pod, err := v.admin.Pods().Create(ctx, api.Pod{Name: "kvm-01", Type: "virsh", Rack: v.vlan.PrimaryRack,
		PowerAddress: "qemu:///system?socket=" + socket})
	if err != nil {
		t.Fatal(err)
	}

	unix, err := pods.DialUnix(socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	sshd := sshdtest.Start(t, t.TempDir())
	signer := sshdtest.NewSigner(t)
	sshd.Authorize(t, signer, "rack")
	overSSH, err := pods.DialSSH(pods.SSH{Addr: sshd.Addr, User: "root", Signer: signer, HostKey: sshd.HostKey, Socket: socket}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer overSSH.Close()

	type vm struct {
		via      string
		conn     *pods.Conn
		composed api.ComposedVM
		machine  api.Machine
	}
	vms := []*vm{{via: "unix socket", conn: unix}, {via: "SSH", conn: overSSH}}
	for i, m := range vms {
		m.composed, err = m.conn.Compose(api.PodVM{
			Name: fmt.Sprintf("kvm-01-vm%d", i), Cores: 1, MemoryBytes: 128 << 20,
			Disks: []api.PodDisk{{Pool: pool, SizeBytes: 64 << 20}},
			NIC:   api.PodNIC{Bridge: bridge},
		})
		if err != nil {
			t.Fatalf("compose over %s: %v", m.via, err)
		}
		// As `pods compose` declares it: the machine's UUID is the VM's, which its firmware
		// reports as the SMBIOS UUID.
		m.machine, err = v.admin.Machines().Create(ctx, api.Machine{
			Uuid: m.composed.UUID, Name: m.composed.Name, HardwareAddrs: []string{m.composed.MAC},
			Fingerprint: api.Fingerprint{SystemUUID: m.composed.UUID}, Pod: pod.Uuid, Rack: pod.Rack, Status: api.StatusNew,
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Cleanup(func() { // before libvirtd stops: the failure says how far each VM got
		if t.Failed() {
			for _, m := range vms {
				t.Log(libvirtdtest.DomainReport(t, dir, socket, m.composed.Name))
			}
		}
	})
	poweredOn := time.Now()
	for _, m := range vms {
		if err := m.conn.Power(m.composed.Name, api.PowerOn); err != nil {
			t.Fatalf("power on over %s: %v", m.via, err)
		}
		if st, err := m.conn.PowerState(m.composed.UUID); err != nil || st != api.PowerOn {
			t.Fatalf("power state over %s after power on: %q, %v", m.via, st, err)
		}
	}
	var ms []api.Machine
	testutil.EventuallyOK(t, podVMBootTimeout, func() string {
		if ms, err = v.admin.Machines().List(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, m := range vms {
			i := slices.IndexFunc(ms, func(x api.Machine) bool { return x.Uuid == m.machine.Uuid })
			if i < 0 || ms[i].Enlisted == nil || ms[i].Enlisted.Boot == nil {
				return fmt.Sprintf("the VM composed over %s has not enlisted onto its machine %s within %s of power-on", m.via, m.machine.Name, podVMBootTimeout)
			}
		}
		return ""
	})
	t.Logf("pod VMs: power-on to both enlisted in %s", time.Since(poweredOn).Round(10*time.Millisecond))
	if len(ms) != len(vms) {
		t.Fatalf("%d machines after the boots, want the %d declared: %+v", len(ms), len(vms), ms)
	}
	for _, m := range vms {
		got := ms[slices.IndexFunc(ms, func(x api.Machine) bool { return x.Uuid == m.machine.Uuid })]
		if b := got.Enlisted.Boot; b.MAC != m.composed.MAC || b.UUID != m.composed.UUID || got.Pod != pod.Uuid {
			t.Errorf("VM composed over %s enlisted with boot facts %+v, pod %q: want MAC %s, UUID %s, pod %s",
				m.via, b, got.Pod, m.composed.MAC, m.composed.UUID, pod.Uuid)
		}
	}

	for _, m := range vms {
		if err := m.conn.Power(m.composed.UUID, api.PowerOff); err != nil {
			t.Fatalf("power off over %s: %v", m.via, err)
		}
		if st, err := m.conn.PowerState(m.composed.Name); err != nil || st != api.PowerOff {
			t.Fatalf("power state over %s after power off: %q, %v", m.via, st, err)
		}
		if err := m.conn.Decompose(m.composed.UUID); err != nil {
			t.Fatalf("decompose over %s: %v", m.via, err)
		}
	}
	if doms := libvirtdtest.Domains(t, socket); len(doms) != 0 {
		t.Errorf("domains left after decompose: %v", doms)
	}
	if vols := libvirtdtest.Volumes(t, socket, pool); len(vols) != 0 {
		t.Errorf("volumes left after decompose: %v", vols)
	}
}
