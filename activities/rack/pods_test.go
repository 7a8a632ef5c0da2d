package rack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/dev/libvirtdtest"
	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/region/api"
)

const (
	testRack = "0a000000-0000-4000-8000-000000000001"
	testPod  = "0d000000-0000-4000-8000-000000000001"
)

// podRack is a rack with a UUID, for the pod activities' check that a pod is theirs.
type podRack struct{ fakeRack }

func (podRack) State() State { return State{Uuid: testRack} }

// podRegion is an in-memory region of one pod: it records each write of facts and the
// machines declared.
type podRegion struct {
	mu       sync.Mutex
	pod      api.Pod
	writes   int
	machines map[string]api.Machine
}

func (r *podRegion) Pod(_ context.Context, key string) (api.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if key != r.pod.Uuid && key != "Name:"+r.pod.Name {
		return api.Pod{}, fmt.Errorf("pod %s not found", key)
	}
	return r.pod, nil
}

func (r *podRegion) RackPods(context.Context) ([]api.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return []api.Pod{r.pod}, nil
}

func (r *podRegion) StorePodFacts(_ context.Context, _ string, f api.PodFacts) (api.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	r.pod.Arch, r.pod.Cores, r.pod.MemoryMiB, r.pod.StorageGiB, r.pod.StoragePools, r.pod.Networks =
		f.Arch, f.Cores, f.MemoryMiB, f.StorageGiB, f.StoragePools, f.Networks
	return r.pod, nil
}

func (r *podRegion) DeclarePodVM(_ context.Context, pod string, m api.Machine) (api.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m.Pod, m.Rack = pod, testRack
	r.machines[m.Uuid] = m
	if !slices.Contains(r.pod.VMs, m.Uuid) {
		r.pod.VMs = append(r.pod.VMs, m.Uuid)
	}
	return m, nil
}

func (r *podRegion) ForgetPodVM(_ context.Context, _, machine string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.machines, machine)
	r.pod.VMs = slices.DeleteFunc(r.pod.VMs, func(v string) bool { return v == machine })
	return nil
}

func (r *podRegion) VerifyGrant(context.Context, api.GrantCheck) (api.GrantClaims, error) {
	return api.GrantClaims{GrantedTo: "alice"}, nil
}

// podHost is a real libvirtd with a dir pool, and the activities of a rack hosting it.
type podHost struct {
	socket, pool, poolDir string
	region                *podRegion
	acts                  *Activities
}

func startPodHost(t *testing.T) podHost {
	t.Helper()
	dir := t.TempDir()
	socket := libvirtdtest.Start(t, dir)
	pool, poolDir := "ironflow-acts-"+filepath.Base(dir), filepath.Join(dir, "pool")
	libvirtdtest.DirPool(t, socket, pool, poolDir)
	r := &podRegion{
		pod:      api.Pod{Uuid: testPod, Name: "kvm-01", Rack: testRack, PowerAddress: "qemu:///system?socket=" + socket, VMs: []string{}},
		machines: map[string]api.Machine{},
	}
	acts := New(&podRack{}, nil, Pods{Region: r, Dialer: pods.Dialer{Timeout: 10 * time.Second}})
	return podHost{socket: socket, pool: pool, poolDir: poolDir, region: r, acts: acts}
}

// composeInput asks for a small VM with one disk from the host's pool, under the UUID id.
func (h podHost) composeInput(id string) ComposeVMInput {
	return ComposeVMInput{Pod: testPod, VM: api.PodVM{
		Name: vmName(), UUID: id, Cores: 1, MemoryBytes: 128 << 20,
		Disks: []api.PodDisk{{Pool: h.pool, SizeBytes: 1 << 30}}, NIC: api.PodNIC{Bridge: "br0"},
	}}
}

// composed composes a VM as composeInput(id) asks, undone when the test ends, and returns
// the input.
func (h podHost) composed(t *testing.T, id string) ComposeVMInput {
	t.Helper()
	in := h.composeInput(id)
	if _, err := h.acts.ComposeVM(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.acts.UndoComposeVM(context.Background(), in) })
	return in
}

func vmName() string { return fmt.Sprintf("ironflow-acts-%d", time.Now().UnixNano()) }

// wantAppError checks that err is a non-retryable application error of type errType whose
// message has want.
func wantAppError(t *testing.T, what string, err error, errType, want string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != errType || !appErr.NonRetryable() || !strings.Contains(appErr.Error(), want) {
		t.Errorf("%s: %v, want a non-retryable %s error with %q", what, err, errType, want)
	}
}

// A compose is keyed by its VM's name: a retry (same name and UUID) finds the VM an earlier
// attempt defined and composes nothing more; the same name with another UUID is a name clash.
func TestComposeVMIsIdempotentAndRefusesANameClash(t *testing.T) {
	h := startPodHost(t)
	ctx := context.Background()
	in := h.composeInput("5e000000-0000-4000-8000-000000000001")
	first, err := h.acts.ComposeVM(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.acts.UndoComposeVM(ctx, in) })
	again, err := h.acts.ComposeVM(ctx, in)
	if err != nil || again.UUID != first.UUID || again.MAC != first.MAC || !slices.Equal(again.Volumes, first.Volumes) {
		t.Fatalf("retried compose: %+v, %v; want the first %+v", again, err, first)
	}
	if vols := libvirtdtest.Volumes(t, h.socket, h.pool); !slices.Equal(vols, []string{in.VM.Name + "-disk0"}) {
		t.Errorf("pool volumes %v, want the one disk once", vols)
	}

	clash := in
	clash.VM.UUID = "5e000000-0000-4000-8000-000000000002"
	_, err = h.acts.ComposeVM(ctx, clash)
	wantAppError(t, "same name, another UUID", err, ErrTypeNameClash, "already has a VM named "+in.VM.Name)

	d, err := h.acts.DeclareVM(ctx, DeclareVMInput{Pod: testPod, Composed: first})
	m := h.region.machines[first.UUID]
	if err != nil || d.Machine != first.UUID || m.HardwareAddrs[0] != first.MAC || m.Fingerprint.SystemUUID != first.UUID || m.Status != api.StatusNew {
		t.Fatalf("declared %+v (%v), machine %+v", d, err, m)
	}
	if err := h.acts.DecomposeVM(ctx, VMInput{Pod: testPod, VM: first.UUID}); err != nil {
		t.Fatal(err)
	}
	if err := h.acts.DecomposeVM(ctx, VMInput{Pod: testPod, VM: first.UUID}); err != nil {
		t.Errorf("decompose retried after its domain is gone: %v, want done", err)
	}
	if err := h.acts.ForgetVM(ctx, VMInput{Pod: testPod, VM: first.UUID}); err != nil {
		t.Fatal(err)
	}
	if vols := libvirtdtest.Volumes(t, h.socket, h.pool); len(vols) != 0 || len(h.region.machines) != 0 || len(h.region.pod.VMs) != 0 {
		t.Errorf("after decompose: volumes %v, machines %v, pod VMs %v", vols, h.region.machines, h.region.pod.VMs)
	}
}

// The undo of a compose removes the compose's VM before it is declared (it is not among the
// pod's VMs yet, where DecomposeVM acts), and finds nothing to do the second time.
func TestUndoComposeVMRemovesItsUndeclaredVM(t *testing.T) {
	h := startPodHost(t)
	ctx := context.Background()
	in := h.composed(t, "5e000000-0000-4000-8000-000000000007")
	for range 2 {
		if err := h.acts.UndoComposeVM(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if doms, vols := libvirtdtest.Domains(t, h.socket), libvirtdtest.Volumes(t, h.socket, h.pool); len(doms) != 0 || len(vols) != 0 {
		t.Errorf("after the undo: domains %v, volumes %v; want none", doms, vols)
	}
	noName := in
	noName.VM.Name = ""
	wantAppError(t, "undo without the VM's name", h.acts.UndoComposeVM(ctx, noName), ErrTypeInvalidInput, "needs its Name and UUID")
}

// The rack acts only on the VMs in its pod's VMs: a domain defined on the hypervisor without
// Ironflow (or a VM of another pod) is neither powered nor decomposed, by UUID or by name,
// and the undo of a compose leaves a domain of its name with another UUID alone.
func TestPodActivitiesActOnlyOnThePodsVMs(t *testing.T) {
	h := startPodHost(t)
	ctx := context.Background()
	conn, err := pods.Dialer{Timeout: 10 * time.Second}.Dial(h.region.pod)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	foreign := h.composeInput("5e000000-0000-4000-8000-000000000005").VM
	if _, err := conn.Compose(foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Decompose(foreign.UUID) })

	for _, key := range []string{foreign.UUID, foreign.Name} {
		_, err := h.acts.PowerVM(ctx, PowerVMInput{Pod: testPod, VM: key, Action: api.PowerOn})
		wantAppError(t, "power of a domain not in the pod's VMs", err, ErrTypeNoVM, "no such VM")
		err = h.acts.DecomposeVM(ctx, VMInput{Pod: testPod, VM: key})
		wantAppError(t, "decompose of a domain not in the pod's VMs", err, ErrTypeNoVM, "no such VM")
	}
	other := ComposeVMInput{Pod: testPod, VM: foreign}
	other.VM.UUID = "5e000000-0000-4000-8000-000000000006"
	if err := h.acts.UndoComposeVM(ctx, other); err != nil {
		t.Errorf("undo of a compose whose name another VM has: %v, want nothing done", err)
	}
	if doms := libvirtdtest.Domains(t, h.socket); !slices.Contains(doms, foreign.Name) {
		t.Errorf("domains %v, want %s still defined", doms, foreign.Name)
	}
	if vols := libvirtdtest.Volumes(t, h.socket, h.pool); !slices.Equal(vols, []string{foreign.Name + "-disk0"}) {
		t.Errorf("pool volumes %v, want the domain's disk kept", vols)
	}
	if state, err := conn.PowerState(foreign.UUID); err != nil || state != api.PowerOff {
		t.Errorf("power state %q (%v), want off", state, err)
	}
}

// A compose the rack did not live to finish leaves a domain naming a volume not made yet (here:
// its file deleted and the pool refreshed). The retry, same UUID, removes that VM and composes
// it whole; the same half-made VM met by a compose under another UUID is a name clash, and
// stays.
func TestComposeVMRetriedAfterTheRackDiedHalfWay(t *testing.T) {
	h := startPodHost(t)
	ctx := context.Background()
	in := h.composed(t, "5e000000-0000-4000-8000-000000000003")
	if err := os.Remove(filepath.Join(h.poolDir, in.VM.Name+"-disk0")); err != nil {
		t.Fatal(err)
	}
	if vols := libvirtdtest.Volumes(t, h.socket, h.pool); len(vols) != 0 {
		t.Fatalf("pool volumes %v, want none: the compose stopped before its volume", vols)
	}

	clash := in
	clash.VM.UUID = "5e000000-0000-4000-8000-000000000004"
	_, err := h.acts.ComposeVM(ctx, clash)
	wantAppError(t, "same name as a half-made VM, another UUID", err, ErrTypeNameClash, "already has a VM named "+in.VM.Name)

	again, err := h.acts.ComposeVM(ctx, in)
	if err != nil || again.UUID != in.VM.UUID || len(again.Volumes) != 1 {
		t.Fatalf("compose retried after the rack died half-way: %+v, %v", again, err)
	}
	if vols := libvirtdtest.Volumes(t, h.socket, h.pool); !slices.Equal(vols, []string{in.VM.Name + "-disk0"}) {
		t.Errorf("pool volumes %v, want the one disk", vols)
	}
	if doms := libvirtdtest.Domains(t, h.socket); !slices.Equal(doms, []string{in.VM.Name}) {
		t.Errorf("domains %v, want the one VM", doms)
	}
}

// What the request or the pod makes impossible is final and creates nothing; a pod of another
// rack, or one named otherwise than by its UUID, is refused before the hypervisor is reached.
func TestPodActivitiesRefuseBadInputFinally(t *testing.T) {
	h := startPodHost(t)
	ctx := context.Background()
	vm := func(edit func(*api.PodVM)) ComposeVMInput {
		v := api.PodVM{Name: vmName(), UUID: "5e000000-0000-4000-8000-000000000003", Cores: 1, MemoryBytes: 128 << 20,
			Disks: []api.PodDisk{{Pool: h.pool, SizeBytes: 1 << 30}}, NIC: api.PodNIC{Bridge: "br0"}}
		edit(&v)
		return ComposeVMInput{Pod: testPod, VM: v}
	}
	for _, c := range []struct {
		what    string
		in      ComposeVMInput
		errType string
		want    string
	}{
		{"pool without room", vm(func(v *api.PodVM) { v.Disks[0].SizeBytes = 1 << 60 }), ErrTypePodRefused, "bytes available"},
		{"unknown pool", vm(func(v *api.PodVM) { v.Disks[0].Pool = "nope" }), ErrTypePodRefused, "storage pool nope"},
		{"wrong arch", vm(func(v *api.PodVM) { v.Arch = "s390x" }), ErrTypePodRefused, "cannot run architecture"},
		{"bad name", vm(func(v *api.PodVM) { v.Name = "a/b" }), ErrTypePodRefused, "VM name"},
		{"no UUID", vm(func(v *api.PodVM) { v.UUID = "" }), ErrTypeInvalidInput, "needs its UUID"},
		{"unknown pod", ComposeVMInput{Pod: "0d000000-0000-4000-8000-000000000009", VM: vm(func(*api.PodVM) {}).VM}, ErrTypeRegionRefused, "not found"},
	} {
		_, err := h.acts.ComposeVM(ctx, c.in)
		if c.errType == ErrTypeRegionRefused {
			// The fake region's not-found is a plain error: retried, not final.
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v", c.what, err)
			}
			continue
		}
		wantAppError(t, c.what, err, c.errType, c.want)
	}
	if vols := libvirtdtest.Volumes(t, h.socket, h.pool); len(vols) != 0 {
		t.Errorf("volumes created by refused composes: %v", vols)
	}

	h.region.pod.Rack = "0a000000-0000-4000-8000-000000000002"
	_, err := h.acts.RefreshPod(ctx, PodInput{Pod: testPod})
	wantAppError(t, "a pod of another rack", err, ErrTypeWrongRack, "not by this rack "+testRack)
	h.region.pod.Rack = testRack
	_, err = h.acts.RefreshPod(ctx, PodInput{Pod: "Name:kvm-01"})
	wantAppError(t, "a pod named by its name", err, ErrTypeInvalidInput, "by its UUID "+testPod)

	_, err = h.acts.PowerVM(ctx, PowerVMInput{Pod: testPod, VM: "no-such-vm", Action: api.PowerOn})
	wantAppError(t, "power of a VM the pod lacks", err, ErrTypeNoVM, "no such VM")
	_, err = h.acts.PowerVM(ctx, PowerVMInput{Pod: testPod, VM: "no-such-vm", Action: "reset"})
	wantAppError(t, "unknown power action", err, ErrTypeInvalidInput, "want on, off or cycle")
}

// A refresh stores the facts in one write; with libvirtd unreachable it fails (retryably,
// saying so) and writes nothing, so the stored facts stay as they were.
func TestRefreshPodStoresFactsOnceOrNothing(t *testing.T) {
	h := startPodHost(t)
	ctx := context.Background()
	res, err := h.acts.RefreshPod(ctx, PodInput{Pod: testPod})
	if err != nil {
		t.Fatal(err)
	}
	if h.region.writes != 1 || res.Arch == "" || !slices.ContainsFunc(h.region.pod.StoragePools, func(sp api.PodStoragePool) bool { return sp.Name == h.pool }) {
		t.Fatalf("refresh %+v, %d writes, pools %+v", res, h.region.writes, h.region.pod.StoragePools)
	}
	stored := h.region.pod

	h.region.pod.PowerAddress = "qemu:///system?socket=" + filepath.Join(t.TempDir(), "gone")
	_, err = h.acts.RefreshPod(ctx, PodInput{Pod: testPod})
	wantAppError(t, "refresh of a pod without libvirtd", err, ErrTypeNoDaemon, "connect to libvirt")
	if h.region.writes != 1 || !slices.Equal(h.region.pod.StoragePools, stored.StoragePools) {
		t.Errorf("facts written for an unreachable pod: %d writes", h.region.writes)
	}
	if err := RefreshPods(ctx, h.acts); err == nil || !strings.Contains(err.Error(), "pod kvm-01") {
		t.Errorf("scheduled refresh of an unreachable pod: %v, want an error naming it", err)
	}
}

// With no libvirtd at a local pod's socket (no socket file, or a stale one nobody listens on),
// a refresh fails at once, asking whether libvirtd runs and how to start it.
func TestRefreshWithoutLibvirtdSaysSoAtOnce(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale-sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	for _, socket := range []string{filepath.Join(dir, "missing-sock"), stale} {
		r := &podRegion{pod: api.Pod{Uuid: testPod, Name: "kvm-01", Rack: testRack, PowerAddress: "qemu:///system?socket=" + socket}}
		acts := New(&podRack{}, nil, Pods{Region: r, Dialer: pods.Dialer{Timeout: 10 * time.Second}})
		_, err := acts.RefreshPod(context.Background(), PodInput{Pod: testPod})
		wantAppError(t, "refresh with no libvirtd at "+socket, err, ErrTypeNoDaemon, "is libvirtd running? Start it on the pod's host: systemctl start libvirtd")
		if r.writes != 0 {
			t.Errorf("%s: %d writes of facts", socket, r.writes)
		}
	}
}

// A qemu+ssh pod is reached with the rack's key and the pod's recorded host key; another host
// key is refused for good, as is a qemu+ssh pod without a recorded key.
func TestPodOverSSH(t *testing.T) {
	h := startPodHost(t)
	dir := t.TempDir()
	srv := sshdtest.Start(t, dir)
	signer := sshdtest.NewSigner(t)
	if err := os.MkdirAll(filepath.Dir(srv.KeysFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(srv.KeysFile, []byte(sshdtest.AuthorizedLine(signer, "rack")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.acts.pods.Dialer = pods.Dialer{SSHKey: signer, Timeout: 10 * time.Second}
	h.region.pod.PowerAddress = "qemu+ssh://root@" + srv.Addr + "/system?socket=" + h.socket
	h.region.pod.HostKey = srv.HostKey
	ctx := context.Background()
	if _, err := h.acts.RefreshPod(ctx, PodInput{Pod: testPod}); err != nil {
		t.Fatal(err)
	}

	h.region.pod.HostKey = sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "impostor")
	_, err := h.acts.RefreshPod(ctx, PodInput{Pod: testPod})
	wantAppError(t, "wrong host key", err, ErrTypePodRefused, "host key does not match")
	h.region.pod.HostKey = ""
	_, err = h.acts.RefreshPod(ctx, PodInput{Pod: testPod})
	wantAppError(t, "no host key", err, ErrTypePodRefused, "records no HostKey")
	if h.region.writes != 1 {
		t.Errorf("%d writes of facts, want the first refresh's only", h.region.writes)
	}
}
