package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/dev/libvirtdtest"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/region/api"
)

// podRegion serves one pod and records the merge patches sent to it.
type podRegion struct {
	url string

	mu       sync.Mutex
	pod      api.Pod
	patches  []map[string]json.RawMessage
	machines []api.Machine // declared
	refuse   bool          // refuse machines with 409, as for a name taken
}

func newPodRegion(t *testing.T, pod api.Pod) *podRegion {
	r := &podRegion{pod: pod}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/pods/{key}", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if key := req.PathValue("key"); key != "Name:"+r.pod.Name && key != r.pod.Uuid {
			answer(w, http.StatusNotFound, api.Error{Error: "pods " + key + " not found", Code: 404})
			return
		}
		answer(w, http.StatusOK, r.pod)
	})
	mux.HandleFunc("PATCH /api/v1/pods/{key}", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		body, _ := io.ReadAll(req.Body)
		var patch map[string]json.RawMessage
		if err := json.Unmarshal(body, &patch); err != nil || req.PathValue("key") != r.pod.Uuid {
			answer(w, http.StatusBadRequest, api.Error{Error: "bad patch", Code: 400})
			return
		}
		r.patches = append(r.patches, patch)
		json.Unmarshal(body, &r.pod) // a merge patch of top-level fields: decoding over the pod applies it
		answer(w, http.StatusOK, r.pod)
	})
	mux.HandleFunc("POST /api/v1/machines", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		var m api.Machine
		if err := json.NewDecoder(req.Body).Decode(&m); err != nil || r.refuse {
			answer(w, http.StatusConflict, api.Error{Error: "machine Name " + m.Name + " already exists", Code: 409})
			return
		}
		r.machines = append(r.machines, m)
		answer(w, http.StatusCreated, m)
	})
	mux.HandleFunc("GET /api/v1/machines/{key}", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if i := r.machine(req.PathValue("key")); i >= 0 {
			answer(w, http.StatusOK, r.machines[i])
			return
		}
		answer(w, http.StatusNotFound, api.Error{Error: "machines not found", Code: 404})
	})
	mux.HandleFunc("DELETE /api/v1/machines/{key}", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if i := r.machine(req.PathValue("key")); i >= 0 {
			r.machines = slices.Delete(r.machines, i, i+1)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		answer(w, http.StatusNotFound, api.Error{Error: "machines not found", Code: 404})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func TestPodsRefreshStoresTheHypervisorsFacts(t *testing.T) {
	_, pool, pod := startPodHost(t)
	pod.StorageGiB = 1
	r := newPodRegion(t, pod)

	code, out, stderr := (&fakeRegion{url: r.url}).cli(t, "", "pods", "refresh", "kvm-01", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got api.Pod
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	i := slices.IndexFunc(got.StoragePools, func(sp api.PodStoragePool) bool { return sp.Name == pool })
	if i < 0 {
		t.Fatalf("pool %s not stored: %+v", pool, got.StoragePools)
	}
	sp := got.StoragePools[i]
	if sp.Type != "dir" || filepath.Base(sp.Path) != "pool" || sp.CapacityBytes == 0 || sp.AvailableBytes == 0 {
		t.Errorf("stored pool %+v", sp)
	}
	if got.Arch == "" || got.Cores < 1 || got.MemoryMiB < 1 || got.StorageGiB <= 1 {
		t.Errorf("stored pod facts: arch %q cores %d memory %d MiB storage %d GiB", got.Arch, got.Cores, got.MemoryMiB, got.StorageGiB)
	}
	if len(r.patches) != 1 {
		t.Fatalf("%d patches, want the facts in one", len(r.patches))
	}
	for _, field := range []string{"Arch", "Cores", "MemoryMiB", "StorageGiB", "StoragePools", "Networks"} {
		if _, ok := r.patches[0][field]; !ok {
			t.Errorf("patch without %s", field)
		}
	}
}

func TestPodsRefreshRefusesAnUnreachablePodAndStoresNothing(t *testing.T) {
	for _, c := range []struct{ address, want string }{
		{"qemu+ssh://root@kvm-01/system", "libvirt over SSH is not supported yet"},
		{"xen:///", "want qemu:///system"},
		{"qemu:///system?socket=" + filepath.Join(t.TempDir(), "none"), "connect to libvirt"},
	} {
		r := newPodRegion(t, api.Pod{Uuid: "0d000000-0000-4000-8000-000000000001", Name: "kvm-01", PowerAddress: c.address})
		code, _, stderr := (&fakeRegion{url: r.url}).cli(t, "", "pods", "refresh", "kvm-01")
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want an error with %q", c.address, code, stderr, c.want)
		}
		if len(r.patches) != 0 {
			t.Errorf("%s: patched %v", c.address, r.patches)
		}
	}
}

// machine is the index of the declared machine with key (a UUID or Name:name), or -1.
func (r *podRegion) machine(key string) int {
	return slices.IndexFunc(r.machines, func(m api.Machine) bool { return key == m.Uuid || key == "Name:"+m.Name })
}

// startPodHost is a real libvirtd with a dir pool (its files in a directory named pool), and
// the pod record pointing at it.
func startPodHost(t *testing.T) (socket, pool string, pod api.Pod) {
	dir := t.TempDir()
	socket = libvirtdtest.Start(t, dir)
	pool = "ironflow-cli-" + filepath.Base(dir)
	libvirtdtest.DirPool(t, socket, pool, filepath.Join(dir, "pool"))
	return socket, pool, api.Pod{
		Uuid: "0d000000-0000-4000-8000-000000000001", Name: "kvm-01", Type: "virsh", Rack: "0a000000-0000-4000-8000-000000000001",
		PowerAddress: "qemu:///system?socket=" + socket, VMs: []string{},
	}
}

func TestPodsComposeThenDecompose(t *testing.T) {
	socket, pool, pod := startPodHost(t)
	r := newPodRegion(t, pod)
	name := fmt.Sprintf("ironflow-cli-%d", time.Now().UnixNano())
	code, out, stderr := (&fakeRegion{url: r.url}).cli(t, "", "pods", "compose", "kvm-01", "--name", name,
		"--cores", "2", "--memory", "256M", "--storage", pool+":1G", "--bridge", "br0", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	conn, err := pods.DialUnix(socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer conn.Decompose(name)

	var m api.Machine
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(r.machines) != 1 || m.Name != name || m.Pod != pod.Uuid || m.Rack != pod.Rack || len(m.HardwareAddrs) != 1 || m.Status != api.StatusNew {
		t.Fatalf("declared %+v (%d machines)", m, len(r.machines))
	}
	if _, err := uuid.Parse(m.Uuid); err != nil || m.Fingerprint.SystemUUID != m.Uuid {
		t.Errorf("machine Uuid %q, SMBIOS UUID %q: want the VM's in both: %v", m.Uuid, m.Fingerprint.SystemUUID, err)
	}
	if len(r.patches) != 1 || string(r.patches[0]["VMs"]) != `["`+m.Uuid+`"]` {
		t.Errorf("pod patches %v, want VMs set to the machine", r.patches)
	}
	if vols := libvirtdtest.Volumes(t, socket, pool); !slices.Equal(vols, []string{name + "-disk0"}) {
		t.Errorf("pool volumes %v", vols)
	}

	f := &fakeRegion{url: r.url}
	if code, _, stderr := f.cli(t, "", "pods", "decompose", "kvm-01", name); code != 0 {
		t.Fatalf("decompose: exit %d: %s", code, stderr)
	}
	if vols := libvirtdtest.Volumes(t, socket, pool); len(vols) != 0 {
		t.Errorf("volumes left after decompose: %v", vols)
	}
	if err := conn.Decompose(name); !errors.Is(err, pods.ErrNoVM) {
		t.Errorf("domain after decompose: %v, want it gone", err)
	}
	if len(r.machines) != 0 || len(r.patches) != 2 || string(r.patches[1]["VMs"]) != "[]" {
		t.Errorf("region after decompose: machines %v, pod patches %v", r.machines, r.patches)
	}
	// A machine of another pod is refused.
	r.machines = append(r.machines, api.Machine{Uuid: "3a000000-0000-4000-8000-000000000009", Name: "other", Pod: "0d000000-0000-4000-8000-000000000002"})
	if code, _, stderr := f.cli(t, "", "pods", "decompose", "kvm-01", "other"); code == 0 || !strings.Contains(stderr, "is not a VM of pod kvm-01") {
		t.Errorf("decompose of another pod's machine: exit %d, %s", code, stderr)
	}
}

// When the region refuses the machine, the VM composed for it is decomposed: the hypervisor has
// neither its domain nor its volume.
func TestPodsComposeRefusedByTheRegionLeavesNothingOnThePod(t *testing.T) {
	socket, pool, pod := startPodHost(t)
	r := newPodRegion(t, pod)
	r.refuse = true
	name := fmt.Sprintf("ironflow-cli-%d", time.Now().UnixNano())
	code, _, stderr := (&fakeRegion{url: r.url}).cli(t, "", "pods", "compose", "kvm-01", "--name", name,
		"--memory", "256M", "--storage", pool+":1G", "--bridge", "br0")
	if code == 0 || !strings.Contains(stderr, "declare machine "+name) || !strings.Contains(stderr, "already exists") {
		t.Fatalf("exit %d, stderr %q: want the region's refusal", code, stderr)
	}
	if vols := libvirtdtest.Volumes(t, socket, pool); len(vols) != 0 {
		t.Errorf("volumes left: %v", vols)
	}
	conn, err := pods.DialUnix(socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Decompose(name); !errors.Is(err, pods.ErrNoVM) {
		t.Errorf("domain %s: %v, want it gone", name, err)
	}
	if len(r.patches) != 0 {
		t.Errorf("pod patched: %v", r.patches)
	}
}

func TestPodsComposeBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--memory", "2X"}, "--memory"},
		{[]string{"--memory", "0"}, "--memory"},
		{[]string{"--storage", "10G"}, "want POOL:SIZE"},
		{[]string{"--storage", "default:-1G"}, "positive whole number"},
	} {
		r := newPodRegion(t, api.Pod{Uuid: "0d000000-0000-4000-8000-000000000001", Name: "kvm-01", PowerAddress: "qemu:///system"})
		code, _, stderr := (&fakeRegion{url: r.url}).cli(t, "", append([]string{"pods", "compose", "kvm-01"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
		if len(r.machines) != 0 || len(r.patches) != 0 {
			t.Errorf("%v: region changed", c.args)
		}
	}
}
