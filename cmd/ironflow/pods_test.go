package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/dev/libvirtdtest"
	"github.com/ironflow/ironflow/region/api"
)

// podRegion serves one pod and records the merge patches sent to it.
type podRegion struct {
	url string

	mu      sync.Mutex
	pod     api.Pod
	patches []map[string]json.RawMessage
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
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func TestPodsRefreshStoresTheHypervisorsFacts(t *testing.T) {
	dir := t.TempDir()
	socket := libvirtdtest.Start(t, dir)
	pool := "ironflow-cli-" + filepath.Base(dir)
	libvirtdtest.DirPool(t, socket, pool, filepath.Join(dir, "pool"))
	r := newPodRegion(t, api.Pod{
		Uuid: "0d000000-0000-4000-8000-000000000001", Name: "kvm-01", Type: "virsh",
		PowerAddress: "qemu:///system?socket=" + socket, StorageGiB: 1,
	})

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
	if sp.Type != "dir" || sp.Path != filepath.Join(dir, "pool") || sp.CapacityBytes == 0 || sp.AvailableBytes == 0 {
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
