package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

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
	mux.HandleFunc("POST /api/v1/migrate-grants", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, http.StatusForbidden, api.Error{Error: `role "readonly" may not write grants`, Code: 403})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// machine is the index of the declared machine with key (a UUID or Name:name), or -1.
func (r *podRegion) machine(key string) int {
	return slices.IndexFunc(r.machines, func(m api.Machine) bool { return key == m.Uuid || key == "Name:"+m.Name })
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

// Every pod command that changes something asks the region for a pod grant first: a token the
// region refuses it to (readonly) gets the region's answer, and no workflow starts (the
// Temporal address here is a closed port: reaching it would fail differently).
func TestPodWorkNeedsAGrantFromTheRegion(t *testing.T) {
	pod := api.Pod{Uuid: "0d000000-0000-4000-8000-000000000001", Name: "kvm-01", Rack: "0a000000-0000-4000-8000-000000000001", PowerAddress: "qemu:///system"}
	r := newPodRegion(t, pod)
	r.machines = []api.Machine{{Uuid: "3a000000-0000-4000-8000-000000000001", Name: "vm-1", Pod: pod.Uuid}}
	closed := "127.0.0.1:1"
	for _, args := range [][]string{
		{"pods", "refresh", "kvm-01"},
		{"pods", "compose", "kvm-01", "--storage", "default:1G", "--bridge", "br0"},
		{"pods", "decompose", "kvm-01", "vm-1"},
		{"machines", "power", "on", "vm-1"},
		{"machines", "delete", "vm-1", "--decompose"},
	} {
		code, _, stderr := (&fakeRegion{url: r.url}).cli(t, "", append(args, "--temporal-address", closed)...)
		if code == 0 || !strings.Contains(stderr, "did not authorise work on pod kvm-01 (it takes an operator or admin token)") ||
			!strings.Contains(stderr, `role "readonly" may not write grants`) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if len(r.machines) != 1 || len(r.patches) != 0 {
		t.Errorf("region changed: machines %v, patches %v", r.machines, r.patches)
	}
}

// --decompose is for machines composed on a pod, and power too; an unknown action is refused.
func TestPodVMMachineDeleteAndPowerRefusals(t *testing.T) {
	pod := api.Pod{Uuid: "0d000000-0000-4000-8000-000000000001", Name: "kvm-01", Rack: "0a000000-0000-4000-8000-000000000001"}
	r := newPodRegion(t, pod)
	r.machines = []api.Machine{
		{Uuid: "3a000000-0000-4000-8000-000000000001", Name: "vm-1", Pod: pod.Uuid},
		{Uuid: "3a000000-0000-4000-8000-000000000002", Name: "metal-1"},
	}
	f := &fakeRegion{url: r.url}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"machines", "delete", "Name:metal-1", "--decompose"}, "--decompose: machine metal-1 was not composed on a pod"},
		{[]string{"machines", "delete", "Name:vm-1", "--decompose", "--force"}, "--decompose and --force: give one"},
		{[]string{"machines", "power", "on", "Name:metal-1"}, "machine metal-1 has no power driver in Ironflow"},
		{[]string{"machines", "power", "reset", "Name:vm-1"}, `power action "reset": want on, off, cycle or status`},
	} {
		if code, _, stderr := f.cli(t, "", c.args...); code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
	if len(r.machines) != 2 {
		t.Fatalf("machines %v after refusals", r.machines)
	}
}
