package pods

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"golang.org/x/sys/unix"
	"libvirt.org/go/libvirtxml"

	"github.com/ironflow/ironflow/dev/libvirtdtest"
	"github.com/ironflow/ironflow/region/api"
)

// pod is a real libvirtd with a transient dir storage pool in a directory of the test.
type pod struct {
	daemon  *libvirtdtest.Libvirtd
	conn    *Conn
	socket  string
	pool    string
	poolDir string
}

func startPod(t *testing.T) pod {
	t.Helper()
	return startPodInNetNS(t, "")
}

// startPodInNetNS is startPod with libvirtd in the network namespace netns ("" for the test's own).
func startPodInNetNS(t *testing.T, netns string) pod {
	t.Helper()
	dir := t.TempDir()
	daemon := libvirtdtest.Run(t, dir, netns)
	socket := daemon.Socket
	conn, err := DialUnix(socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	p := pod{daemon: daemon, conn: conn, socket: socket, pool: "ironflow-test-" + filepath.Base(dir), poolDir: filepath.Join(dir, "pool")}
	libvirtdtest.DirPool(t, socket, p.pool, p.poolDir)
	return p
}

// uniqueName is a VM name no earlier run left behind (the system instance keeps domains in /etc/libvirt).
func uniqueName() string {
	return fmt.Sprintf("ironflow-test-%d", time.Now().UnixNano())
}

// volumes lists the names of the pool's volumes.
func (p pod) volumes(t *testing.T) []string {
	t.Helper()
	sp, err := p.conn.lv.StoragePoolLookupByName(p.pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.conn.lv.StoragePoolRefresh(sp, 0); err != nil {
		t.Fatal(err)
	}
	vols, _, err := p.conn.lv.StoragePoolListAllVolumes(sp, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names
}

func (p pod) hasDomain(t *testing.T, name string) bool {
	t.Helper()
	_, err := p.conn.lv.DomainLookupByName(name)
	if err != nil && !isNotFound(err, libvirt.ErrNoDomain) {
		t.Fatal(err)
	}
	return err == nil
}

func TestDiscoverReportsTheDirPoolAsStatfsSeesIt(t *testing.T) {
	p := startPod(t)
	// A transient network (gone with the daemon) on a host bridge: nothing to start but its definition.
	network := p.pool // names of networks and pools are apart
	netDoc, err := (&libvirtxml.Network{
		Name: network, Forward: &libvirtxml.NetworkForward{Mode: "bridge"}, Bridge: &libvirtxml.NetworkBridge{Name: "br-ironflow"},
	}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.conn.lv.NetworkCreateXML(netDoc); err != nil {
		t.Fatal(err)
	}
	// A file written into the pool's directory outside libvirt after the pool started: libvirt's
	// numbers are those of its last refresh, so they match statfs only if Discover refreshed.
	// Its blocks are allocated, and 4 times the slack below.
	f, err := os.Create(filepath.Join(p.poolDir, "written-outside-libvirt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 4*statfsSlack); err != nil {
		t.Fatal(err)
	}
	facts, err := p.conn.Discover()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p.poolDir, &st); err != nil {
		t.Fatal(err)
	}
	if facts.Arch == "" || facts.Cores < 1 || facts.MemoryBytes == 0 {
		t.Fatalf("facts without arch, cores or memory: %+v", facts)
	}
	if !slices.Contains(facts.Networks, Network{Name: network, Bridge: "br-ironflow", Active: true}) {
		t.Errorf("network %s on br-ironflow not discovered: %+v", network, facts.Networks)
	}
	if mem := numaMemTotal(t); facts.MemoryBytes != mem {
		t.Errorf("memory %d bytes, the NUMA nodes have %d", facts.MemoryBytes, mem)
	}
	i := slices.IndexFunc(facts.StoragePools, func(s StoragePool) bool { return s.Name == p.pool })
	if i < 0 {
		t.Fatalf("pool %s not discovered: %+v", p.pool, facts.StoragePools)
	}
	sp := facts.StoragePools[i]
	if sp.Type != "dir" || sp.Path != p.poolDir || !sp.Active {
		t.Errorf("pool %+v: want an active dir pool at %s", sp, p.poolDir)
	}
	// libvirt counts the blocks reserved for root as available (f_bfree, not f_bavail).
	bs := uint64(st.Frsize)
	capacity, available := st.Blocks*bs, st.Bfree*bs
	allocation := capacity - available
	if sp.CapacityBytes != capacity {
		t.Errorf("capacity %d, statfs says %d", sp.CapacityBytes, capacity)
	}
	// The filesystem is shared with everything else on this host: allocation moves between the
	// two reads, so they agree within statfsSlack.
	const slack = statfsSlack
	for _, c := range []struct {
		what      string
		got, want uint64
	}{{"allocation", sp.AllocationBytes, allocation}, {"available", sp.AvailableBytes, available}} {
		if diff := int64(c.got) - int64(c.want); diff > slack || diff < -slack {
			t.Errorf("%s %d, statfs says %d", c.what, c.got, c.want)
		}
	}
}

// statfsSlack is how far a pool's usage and statfs of its directory, read one after the other,
// may differ on a filesystem other processes write to.
const statfsSlack = 64 << 20

// numaMemTotal is the memory of the host's NUMA nodes, which is what libvirt reports (it can be
// less than /proc/meminfo's MemTotal on a VM with hot-added memory, as on this CI host).
func numaMemTotal(t *testing.T) uint64 {
	t.Helper()
	files, err := filepath.Glob("/sys/devices/system/node/node*/meminfo")
	if err != nil || len(files) == 0 {
		t.Fatalf("no NUMA node meminfo: %v", err)
	}
	var total uint64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			// "Node 0 MemTotal:       15034104 kB"
			if fields := strings.Fields(l); len(fields) == 5 && fields[2] == "MemTotal:" {
				var kib uint64
				if _, err := fmt.Sscan(fields[3], &kib); err != nil {
					t.Fatal(err)
				}
				total += kib * 1024
			}
		}
	}
	return total
}

func TestComposeAndDecompose(t *testing.T) {
	p := startPod(t)
	name := uniqueName()
	vm := api.PodVM{
		Name: name, Cores: 2, MemoryBytes: 256 << 20,
		Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 1 << 30}, {Pool: p.pool, SizeBytes: 2 << 30}},
		NIC:   api.PodNIC{Bridge: "br-ironflow", MAC: "52:54:00:12:34:56"},
	}
	got, err := p.conn.Compose(vm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.hasDomain(t, name) {
			p.conn.Decompose(name)
		}
	})
	if got.MAC != vm.NIC.MAC || len(got.Volumes) != 2 || got.UUID == "" {
		t.Errorf("composed %+v", got)
	}
	if vols := p.volumes(t); !slices.Equal(vols, []string{name + "-disk0", name + "-disk1"}) {
		t.Errorf("pool volumes %v, want the VM's two disks", vols)
	}
	dom, err := p.conn.lv.DomainLookupByName(name)
	if err != nil {
		t.Fatalf("domain not defined: %v", err)
	}
	x, err := p.conn.domainXML(dom)
	if err != nil {
		t.Fatal(err)
	}
	var boot []string
	for _, b := range x.OS.BootDevices {
		boot = append(boot, b.Dev)
	}
	if !slices.Equal(boot, []string{"network", "hd"}) {
		t.Errorf("boot order %v, want network first", boot)
	}
	if nic := x.Devices.Interfaces[0]; nic.Source.Bridge == nil || nic.Source.Bridge.Bridge != "br-ironflow" {
		t.Errorf("NIC source %+v, want bridge br-ironflow", nic.Source)
	}
	if x.VCPU.Value != 2 || x.Memory.Value != 256<<10 {
		t.Errorf("vcpu %d, memory %d %s", x.VCPU.Value, x.Memory.Value, x.Memory.Unit)
	}

	if err := p.conn.Decompose(name); err != nil {
		t.Fatal(err)
	}
	if p.hasDomain(t, name) {
		t.Error("domain left after decompose")
	}
	if vols := p.volumes(t); len(vols) != 0 {
		t.Errorf("volumes left after decompose: %v", vols)
	}
	if err := p.conn.Decompose(name); !errors.Is(err, ErrNoVM) {
		t.Errorf("decompose of a VM gone: %v, want ErrNoVM", err)
	}
}

// A compose whose domain libvirt refuses (another client defined one of that name just before)
// makes nothing and leaves the other domain alone.
func TestComposeRefusedAtItsDomainMakesNothing(t *testing.T) {
	p := startPod(t)
	name := uniqueName()
	var existing libvirt.Domain
	conn := dialOnCall(t, p.socket, procDomainDefineXMLFlags, func() { existing = p.defineDomain(t, name) })

	_, err := conn.Compose(api.PodVM{
		Name: name, Cores: 1, MemoryBytes: 128 << 20,
		Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 1 << 30}},
		NIC:   api.PodNIC{Bridge: "br-ironflow"},
	})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "define domain") || !strings.Contains(err.Error(), "already") {
		t.Fatalf("compose onto a name taken half-way: %v, want libvirt's refusal to define the domain", err)
	}
	if vols := p.volumes(t); len(vols) != 0 {
		t.Errorf("volumes left by the refused compose: %v", vols)
	}
	p.wantDomain(t, existing)
}

// A compose that fails half-way (its domain defined, its first volume created, the second
// refused: another client wrote a file of that name into the pool just before) removes its
// domain and its volume again and leaves the other client's file alone.
func TestComposeInterruptedHalfWayLeavesNothing(t *testing.T) {
	p := startPod(t)
	name := uniqueName()
	theirs := filepath.Join(p.poolDir, name+"-disk1")
	conn := dialOnCall(t, p.socket, procStorageVolCreateXML, func() {
		if err := os.WriteFile(theirs, []byte("not Ironflow's"), 0o600); err != nil {
			t.Error(err)
		}
	})

	_, err := conn.Compose(api.PodVM{
		Name: name, Cores: 1, MemoryBytes: 128 << 20,
		Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 1 << 30}, {Pool: p.pool, SizeBytes: 1 << 30}},
		NIC:   api.PodNIC{Bridge: "br-ironflow"},
	})
	if err == nil || !strings.Contains(err.Error(), name+"-disk1") {
		t.Fatalf("compose onto a volume name taken half-way: %v, want libvirt's refusal of the second volume", err)
	}
	if doms := libvirtdtest.Domains(t, p.socket); len(doms) != 0 {
		t.Errorf("domains left by the failed compose: %v", doms)
	}
	if vols := p.volumes(t); !slices.Equal(vols, []string{name + "-disk1"}) {
		t.Errorf("pool volumes after the failed compose: %v, want only the other client's", vols)
	}
	if b, err := os.ReadFile(theirs); err != nil || string(b) != "not Ironflow's" {
		t.Errorf("the other client's file: %q, %v", b, err)
	}
}

// defineDomain defines a small domain named name, as a client other than Ironflow would, and
// undefines it when the test ends.
func (p pod) defineDomain(t *testing.T, name string) libvirt.Domain {
	t.Helper()
	doc, err := (&libvirtxml.Domain{
		Type: "qemu", Name: name, Memory: &libvirtxml.DomainMemory{Value: 64, Unit: "MiB"},
		OS: &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Type: "hvm"}},
	}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dom, err := p.conn.lv.DomainDefineXMLFlags(doc, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.conn.lv.DomainUndefineFlags(dom, 0) })
	return dom
}

// wantDomain checks that the pod still has the domain, the same one.
func (p pod) wantDomain(t *testing.T, want libvirt.Domain) {
	t.Helper()
	dom, err := p.conn.lv.DomainLookupByName(want.Name)
	if err != nil || dom.UUID != want.UUID {
		t.Errorf("the existing domain %s: %v (uuid %x, want %x)", want.Name, err, dom.UUID, want.UUID)
	}
}

func TestComposeRefusesBadRequestsAndCreatesNothing(t *testing.T) {
	p := startPod(t)
	good := api.PodVM{Name: uniqueName(), Cores: 1, MemoryBytes: 128 << 20, Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 1 << 30}}, NIC: api.PodNIC{Bridge: "br0"}}
	for _, c := range []struct {
		what string
		edit func(*api.PodVM)
		want string
	}{
		{"no room in the pool", func(vm *api.PodVM) { vm.Disks[0].SizeBytes = 1 << 60 }, "bytes available"},
		{"unknown pool", func(vm *api.PodVM) { vm.Disks[0].Pool = "nope" }, "storage pool nope"},
		{"an arch the pod cannot run", func(vm *api.PodVM) { vm.Arch = "s390x" }, "cannot run architecture"},
		{"a bad name", func(vm *api.PodVM) { vm.Name = "a/b" }, "VM name"},
		{"no NIC", func(vm *api.PodVM) { vm.NIC = api.PodNIC{} }, "exactly one of a bridge or a network"},
		{"a bad MAC", func(vm *api.PodVM) { vm.NIC.MAC = "zz" }, "MAC"},
		{"more memory than the host", func(vm *api.PodVM) { vm.MemoryBytes = 1 << 50 }, "MiB of memory asked"},
		{"more cores than the host", func(vm *api.PodVM) { vm.Cores = 1 << 16 }, "cores asked"},
	} {
		vm := good
		vm.Disks = slices.Clone(good.Disks)
		c.edit(&vm)
		if _, err := p.conn.Compose(vm); err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want a refusal with %q", c.what, err, c.want)
		}
		if vols := p.volumes(t); len(vols) != 0 {
			t.Errorf("%s: volumes created: %v", c.what, vols)
		}
		if p.hasDomain(t, vm.Name) {
			t.Errorf("%s: domain defined", c.what)
		}
	}
}

// TestPowerRefusesUnknownVMs: a VM the pod does not have is ErrNoVM for every power call.
func TestPowerRefusesUnknownVMs(t *testing.T) {
	p := startPod(t)
	for _, a := range []api.PowerAction{api.PowerOn, api.PowerOff, api.PowerCycle} {
		if err := p.conn.Power("no-such-vm", a); !errors.Is(err, ErrNoVM) {
			t.Errorf("power %s of a missing VM: %v, want ErrNoVM", a, err)
		}
	}
	if _, err := p.conn.PowerState(uniqueName()); !errors.Is(err, ErrNoVM) {
		t.Errorf("power state of a missing VM: %v, want ErrNoVM", err)
	}
}
