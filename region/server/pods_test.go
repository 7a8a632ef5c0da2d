package server_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// A refresh stores a pod's facts with one merge patch; a patch the region refuses leaves the
// facts of the last refresh whole.
func TestPodFactsPatchAndBadFactsChangeNothing(t *testing.T) {
	e := newEnv(t)
	pod := e.create(api.KindPods, map[string]any{"Name": "kvm-01", "Type": "virsh", "PowerAddress": "qemu:///system"})
	path := "/api/v1/pods/" + pod["Uuid"].(string)
	pool := map[string]any{"Name": "default", "Type": "dir", "Path": "/var/lib/libvirt/images", "Active": true,
		"CapacityBytes": 100 << 30, "AllocationBytes": 40 << 30, "AvailableBytes": 60 << 30}
	facts := map[string]any{"Arch": "aarch64", "Cores": 8, "MemoryMiB": 16384, "StorageGiB": 100,
		"StoragePools": []any{pool}, "Networks": []any{map[string]any{"Name": "default", "Bridge": "virbr0", "Active": true}}}
	e.mustDo(api.RoleOperator, http.MethodPatch, path, facts, http.StatusOK)
	want := e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK).json(t)
	if want["Arch"] != "aarch64" || len(want["StoragePools"].([]any)) != 1 || want["StoragePools"].([]any)[0].(map[string]any)["AvailableBytes"] != float64(60<<30) {
		t.Fatalf("stored pod %v", want)
	}

	msg := e.do(api.RoleOperator, http.MethodPatch, path, map[string]any{"HostKey": "not-a-key"}).apiError(t, http.StatusUnprocessableEntity)
	if !strings.Contains(msg, "HostKey: want an SSH public key") {
		t.Errorf("bad HostKey: %q", msg)
	}

	bad := map[string]any{"Arch": "x86_64", "Cores": 1, "StoragePools": []any{pool, pool}}
	msg = e.do(api.RoleOperator, http.MethodPatch, path, bad).apiError(t, http.StatusUnprocessableEntity)
	if !strings.Contains(msg, `StoragePools names lists "default" twice`) {
		t.Errorf("error %q", msg)
	}
	if got := e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK).json(t); !reflect.DeepEqual(got, want) {
		t.Errorf("pod after a refused patch:\n%v\nwant\n%v", got, want)
	}
}

// The rack's pod calls: facts stored in one write, a composed VM declared with its pod and
// rack and added to the pod's VMs (again: the same machine), forgotten (again: nothing to do);
// another rack's token is refused and changes nothing.
func TestRackPodCalls(t *testing.T) {
	e := newEnv(t)
	a := e.register(api.RackRegistration{Name: "rack-a"})
	b := e.register(api.RackRegistration{Name: "rack-b"})
	pod := e.create(api.KindPods, map[string]any{"Name": "kvm-01", "Type": "virsh", "PowerAddress": "qemu:///system", "Rack": a.Rack.Uuid})
	podPath := "/api/v1/pods/" + pod["Uuid"].(string)
	rackPath := func(r api.RackRegistered) string {
		return e.base + "/api/v1/racks/" + r.Rack.Uuid + "/pods/" + pod["Uuid"].(string)
	}
	facts := api.PodFacts{Arch: "aarch64", Cores: 8, MemoryMiB: 4096, StorageGiB: 10,
		StoragePools: []api.PodStoragePool{{Name: "default", Type: "dir", Active: true, CapacityBytes: 10 << 30, AvailableBytes: 4 << 30}}}
	vm := api.Machine{Uuid: "5e000000-0000-4000-8000-000000000001", Name: "vm-1", HardwareAddrs: []string{"52:54:00:00:00:01"}, Status: api.StatusNew}

	// rack-b may not touch rack-a's pod.
	doRequest(t, b.Token, http.MethodPut, rackPath(b)+"/facts", facts).apiError(t, http.StatusForbidden)
	doRequest(t, b.Token, http.MethodPut, rackPath(a)+"/facts", facts).apiError(t, http.StatusForbidden)
	doRequest(t, b.Token, http.MethodPost, rackPath(b)+"/vms", vm).apiError(t, http.StatusForbidden)
	doRequest(t, e.tokens[api.RoleReadonly], http.MethodPost, rackPath(a)+"/vms", vm).apiError(t, http.StatusForbidden)
	before := e.mustDo(api.RoleReadonly, http.MethodGet, podPath, nil, http.StatusOK).json(t)
	if before["Arch"] != nil || len(before["VMs"].([]any)) != 0 {
		t.Fatalf("pod changed by refused calls: %v", before)
	}
	e.do(api.RoleReadonly, http.MethodGet, "/api/v1/machines/"+vm.Uuid, nil).apiError(t, http.StatusNotFound)

	if r := doRequest(t, a.Token, http.MethodPut, rackPath(a)+"/facts", facts); r.code != http.StatusOK || r.json(t)["Arch"] != "aarch64" {
		t.Fatalf("facts: %d %s", r.code, r.body)
	}
	bad := facts
	bad.StoragePools = append(bad.StoragePools, bad.StoragePools[0])
	doRequest(t, a.Token, http.MethodPut, rackPath(a)+"/facts", bad).apiError(t, http.StatusUnprocessableEntity)
	if got := e.mustDo(api.RoleReadonly, http.MethodGet, podPath, nil, http.StatusOK).json(t); len(got["StoragePools"].([]any)) != 1 {
		t.Errorf("refused facts stored: %v", got["StoragePools"])
	}

	for range 2 { // the second declaration is a retry: the same machine, one VM
		r := doRequest(t, a.Token, http.MethodPost, rackPath(a)+"/vms", vm)
		m := r.json(t)
		if r.code != http.StatusOK || m["Pod"] != pod["Uuid"] || m["Rack"] != a.Rack.Uuid || m["Uuid"] != vm.Uuid {
			t.Fatalf("declare: %d %s", r.code, r.body)
		}
	}
	if got := e.mustDo(api.RoleReadonly, http.MethodGet, podPath, nil, http.StatusOK).json(t)["VMs"].([]any); len(got) != 1 || got[0] != vm.Uuid {
		t.Errorf("pod VMs %v", got)
	}
	other := e.create(api.KindMachines, map[string]any{"Name": "metal-1"})
	clash := vm
	clash.Uuid = other["Uuid"].(string)
	doRequest(t, a.Token, http.MethodPost, rackPath(a)+"/vms", clash).apiError(t, http.StatusConflict)
	doRequest(t, a.Token, http.MethodDelete, rackPath(a)+"/vms/"+clash.Uuid, nil).apiError(t, http.StatusConflict)

	// Deleting the machine alone would leave its VM on the pod: refused unless forced.
	if msg := e.do(api.RoleAdmin, http.MethodDelete, "/api/v1/machines/"+vm.Uuid, nil).apiError(t, http.StatusConflict); !strings.Contains(msg, "--decompose") {
		t.Errorf("delete of a pod VM's machine: %s", msg)
	}
	for range 2 { // forgetting again finds nothing to do
		if r := doRequest(t, a.Token, http.MethodDelete, rackPath(a)+"/vms/"+vm.Uuid, nil); r.code != http.StatusNoContent {
			t.Fatalf("forget: %d %s", r.code, r.body)
		}
	}
	e.do(api.RoleReadonly, http.MethodGet, "/api/v1/machines/"+vm.Uuid, nil).apiError(t, http.StatusNotFound)
	if got := e.mustDo(api.RoleReadonly, http.MethodGet, podPath, nil, http.StatusOK).json(t)["VMs"].([]any); len(got) != 0 {
		t.Errorf("pod VMs after forget %v", got)
	}
	if r := doRequest(t, a.Token, http.MethodPost, rackPath(a)+"/vms", vm); r.code != http.StatusOK {
		t.Fatalf("declare again: %d %s", r.code, r.body)
	}
	e.mustDo(api.RoleAdmin, http.MethodDelete, "/api/v1/machines/"+vm.Uuid+"?force=true", nil, http.StatusNoContent)
}

// Work on a pod takes a pod grant, which only an operator or admin gets; it covers that pod
// only, and a rack's token can verify it.
func TestPodGrants(t *testing.T) {
	e := newEnv(t)
	a := e.register(api.RackRegistration{Name: "rack-a"})
	pod := e.create(api.KindPods, map[string]any{"Name": "kvm-01", "Rack": a.Rack.Uuid})["Uuid"].(string)
	other := e.create(api.KindPods, map[string]any{"Name": "kvm-02", "Rack": a.Rack.Uuid})["Uuid"].(string)
	req := api.GrantRequest{Kind: api.GrantPod, Key: "Name:kvm-01"}
	e.do(api.RoleReadonly, http.MethodPost, "/api/v1/migrate-grants", req).apiError(t, http.StatusForbidden)
	e.do(api.RoleOperator, http.MethodPost, "/api/v1/migrate-grants", api.GrantRequest{Kind: api.GrantPod, Key: pod, TargetRegion: "b"}).apiError(t, http.StatusUnprocessableEntity)
	var g api.Grant
	decodeJSON(t, e.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/migrate-grants", req, http.StatusCreated), &g)
	if g.Subject != pod || g.GrantedTo == "" {
		t.Fatalf("grant %+v", g.GrantClaims)
	}
	verify := func(key string) response {
		return doRequest(t, a.Token, http.MethodPost, e.base+"/api/v1/migrate-grants/verify", api.GrantCheck{Grant: g.Token, Kind: api.GrantPod, Key: key, Migration: "pod-refresh/" + key})
	}
	if r := verify(pod); r.code != http.StatusOK {
		t.Fatalf("verify: %d %s", r.code, r.body)
	}
	if msg := verify(other).apiError(t, http.StatusForbidden); !strings.Contains(msg, "does not cover") {
		t.Errorf("grant for kvm-01 used on kvm-02: %s", msg)
	}
}
