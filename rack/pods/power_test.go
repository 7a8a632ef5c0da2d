package pods

import (
	"errors"
	"strings"
	"testing"

	"github.com/digitalocean/go-libvirt"

	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/region/api"
)

// bridge is the host bridge of runningPod's namespace that its VMs' NICs join.
const bridge = "br-ironflow"

// runningPod is a pod whose VMs can run: its libvirtd is in a network namespace of the test
// that has the bridge.
func runningPod(t *testing.T) pod {
	t.Helper()
	ns := netnstest.Namespace(t, "pw")
	netnstest.IP(t, "-n", ns, "link", "add", bridge, "type", "bridge")
	netnstest.IP(t, "-n", ns, "link", "set", bridge, "up")
	return startPodInNetNS(t, ns)
}

// composeSmall composes a small VM on the bridge (its disk is never booted: the firmware tries
// the network first and finds nothing) and decomposes it when the test ends.
func composeSmall(t *testing.T, p pod) api.ComposedVM {
	t.Helper()
	vm, err := p.conn.Compose(api.PodVM{
		Name: uniqueName(), Cores: 1, MemoryBytes: 64 << 20,
		Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 16 << 20}},
		NIC:   api.PodNIC{Bridge: bridge},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.hasDomain(t, vm.Name) {
			p.conn.Decompose(vm.Name)
		}
	})
	return vm
}

// domainID is the ID libvirt gave the VM's running domain: a new one each time it starts, -1
// when it does not run.
func (p pod) domainID(t *testing.T, vm string) int32 {
	t.Helper()
	dom, err := p.conn.lv.DomainLookupByName(vm)
	if err != nil {
		t.Fatal(err)
	}
	return dom.ID
}

func (p pod) wantState(t *testing.T, vm string, want api.PowerAction) {
	t.Helper()
	got, err := p.conn.PowerState(vm)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("power state %q, want %q", got, want)
	}
}

// TestPowerOfARunningVM: on, off and cycle against a VM that really runs (QEMU under TCG).
// On and off are idempotent (a running VM is not restarted by on), cycle restarts a running VM
// (it gets a new domain ID) and starts a stopped one, and the key may be the VM's name or UUID.
func TestPowerOfARunningVM(t *testing.T) {
	p := runningPod(t)
	vm := composeSmall(t, p)
	p.wantState(t, vm.Name, api.PowerOff)

	power := func(key string, a api.PowerAction) {
		t.Helper()
		if err := p.conn.Power(key, a); err != nil {
			t.Fatal(err)
		}
	}
	power(vm.Name, api.PowerOn)
	p.wantState(t, vm.Name, api.PowerOn)
	first := p.domainID(t, vm.Name)
	if first < 1 {
		t.Fatalf("running domain has ID %d", first)
	}
	power(vm.UUID, api.PowerOn)
	if id := p.domainID(t, vm.Name); id != first {
		t.Fatalf("power on of a running VM restarted it: domain ID %d, was %d", id, first)
	}

	power(vm.Name, api.PowerCycle)
	p.wantState(t, vm.Name, api.PowerOn)
	cycled := p.domainID(t, vm.Name)
	if cycled == first || cycled < 1 {
		t.Fatalf("power cycle of a running VM: domain ID %d, was %d: want it restarted", cycled, first)
	}

	power(vm.UUID, api.PowerOff)
	p.wantState(t, vm.Name, api.PowerOff)
	power(vm.Name, api.PowerOff)
	p.wantState(t, vm.Name, api.PowerOff)

	power(vm.Name, api.PowerCycle)
	p.wantState(t, vm.Name, api.PowerOn)
	if id := p.domainID(t, vm.Name); id == cycled || id < 1 {
		t.Fatalf("power cycle of a stopped VM: domain ID %d, was %d before it stopped", id, cycled)
	}
}

// TestPowerOnWithoutItsDiskSaysSo: a VM whose disk volume was deleted behind the pod's back does
// not start, and the error names the missing volume.
func TestPowerOnWithoutItsDiskSaysSo(t *testing.T) {
	p := runningPod(t)
	vm := composeSmall(t, p)
	if err := p.conn.deleteVolume(vm.Volumes[0].Pool, vm.Volumes[0].Name); err != nil {
		t.Fatal(err)
	}
	for _, a := range []api.PowerAction{api.PowerOn, api.PowerCycle} {
		err := p.conn.Power(vm.Name, a)
		want := "disk vda: volume " + p.pool + "/" + vm.Name + "-disk0 is gone"
		if !errors.Is(err, ErrMissingDisk) || !strings.Contains(err.Error(), want) {
			t.Fatalf("power %s of a VM without its disk: %v, want ErrMissingDisk with %q", a, err, want)
		}
		p.wantState(t, vm.Name, api.PowerOff)
	}
}

// TestPowerOnResumesAPausedVM: a paused VM is on to PowerState (it holds its memory and CPUs),
// and power on makes it run again rather than leaving it paused.
func TestPowerOnResumesAPausedVM(t *testing.T) {
	p := runningPod(t)
	vm := composeSmall(t, p)
	if err := p.conn.Power(vm.Name, api.PowerOn); err != nil {
		t.Fatal(err)
	}
	dom, err := p.conn.lv.DomainLookupByName(vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.conn.lv.DomainSuspend(dom); err != nil {
		t.Fatal(err)
	}
	p.wantState(t, vm.Name, api.PowerOn)
	if err := p.conn.Power(vm.Name, api.PowerOn); err != nil {
		t.Fatal(err)
	}
	state, _, err := p.conn.lv.DomainGetState(dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	if libvirt.DomainState(state) != libvirt.DomainRunning {
		t.Fatalf("domain state %d after power on of a paused VM, want running (%d)", state, libvirt.DomainRunning)
	}
	if id := p.domainID(t, vm.Name); id != dom.ID {
		t.Fatalf("power on of a paused VM restarted it: domain ID %d, was %d", id, dom.ID)
	}
}
