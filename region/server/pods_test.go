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

// A rack declares a pod VM with what a compose produces and nothing more: a declaration
// choosing the machine's address, secret, Meta, lock, pool or other identities is refused
// whole, as is a name that an operator's DNS record in the default domain owns (the VM's
// address record would replace it); none of it creates a machine or changes the pod.
func TestRackDeclaresOnlyWhatAComposeProduces(t *testing.T) {
	e := newEnv(t)
	a := e.register(api.RackRegistration{Name: "rack-a"})
	pod := e.create(api.KindPods, map[string]any{"Name": "kvm-01", "Rack": a.Rack.Uuid})["Uuid"].(string)
	e.create(api.KindPools, map[string]any{"Name": "prod"})
	e.create(api.KindDomains, map[string]any{"Name": "example.com", "Default": true})
	cname := e.create(api.KindDNSRecords, map[string]any{"Domain": "example.com", "Name": "www", "Type": "CNAME", "Data": "web.example.net."})
	e.create(api.KindDomains, map[string]any{"Name": "other.org"})
	e.create(api.KindDNSRecords, map[string]any{"Domain": "other.org", "Name": "vm-1", "Type": "A", "Data": "192.0.2.1"})
	vms := e.base + "/api/v1/racks/" + a.Rack.Uuid + "/pods/" + pod + "/vms"
	const id = "5e000000-0000-4000-8000-000000000002"
	compose := func(name string) api.Machine {
		return api.Machine{Uuid: id, Name: name, HardwareAddrs: []string{"52:54:00:00:00:02"}, Fingerprint: api.Fingerprint{SystemUUID: id}, Status: api.StatusNew}
	}
	for _, c := range []struct {
		name string
		set  func(*api.Machine)
		code int
		want string
	}{
		{"address", func(m *api.Machine) { m.Address = "10.9.0.5" }, http.StatusUnprocessableEntity, "not Address"},
		{"secret", func(m *api.Machine) { m.Secret = "chosen" }, http.StatusUnprocessableEntity, "not Secret"},
		{"meta", func(m *api.Machine) { m.Meta = map[string]string{"k": "v"} }, http.StatusUnprocessableEntity, "not Meta"},
		{"locked and pool", func(m *api.Machine) { m.Locked, m.Pool = true, "prod" }, http.StatusUnprocessableEntity, "not Locked, Pool"},
		{"another identity", func(m *api.Machine) { m.Fingerprint.SSNHash = "abc" }, http.StatusUnprocessableEntity, "not Fingerprint.SSNHash"},
		{"another SMBIOS UUID", func(m *api.Machine) { m.Fingerprint.SystemUUID = "5e000000-0000-4000-8000-0000000000ff" }, http.StatusUnprocessableEntity, "not its Uuid"},
		{"two MACs", func(m *api.Machine) { m.HardwareAddrs = append(m.HardwareAddrs, "52:54:00:00:00:03") }, http.StatusUnprocessableEntity, "want its one MAC"},
		{"status", func(m *api.Machine) { m.Status = api.StatusReady }, http.StatusUnprocessableEntity, "want New"},
		{"the operator's CNAME", func(m *api.Machine) { m.Name = "WWW" }, http.StatusConflict, "CNAME record " + cname["Uuid"].(string)},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := compose("vm-1")
			c.set(&m)
			if msg := doRequest(t, a.Token, http.MethodPost, vms, m).apiError(t, c.code); !strings.Contains(msg, c.want) {
				t.Errorf("refusal %q, want it to name %q", msg, c.want)
			}
		})
	}
	e.do(api.RoleReadonly, http.MethodGet, "/api/v1/machines/"+id, nil).apiError(t, http.StatusNotFound)
	if got := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/pods/"+pod, nil, http.StatusOK).json(t)["VMs"].([]any); len(got) != 0 {
		t.Errorf("pod VMs after refused declarations %v", got)
	}
	if got := e.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/dnsrecords/"+cname["Uuid"].(string), nil, http.StatusOK).json(t); got["Type"] != "CNAME" {
		t.Errorf("operator's record %v", got)
	}

	// A record of another domain than the default is no clash: the VM's name is in the default.
	r := doRequest(t, a.Token, http.MethodPost, vms, compose("vm-1"))
	m := r.json(t)
	if r.code != http.StatusOK || m["Address"] != "" || m["Locked"] != false || m["Pool"] != "" || m["Status"] != api.StatusNew ||
		m["Fingerprint"].(map[string]any)["SystemUUID"] != id {
		t.Fatalf("declare: %d %s", r.code, r.body)
	}
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
