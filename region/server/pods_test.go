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

	bad := map[string]any{"Arch": "x86_64", "Cores": 1, "StoragePools": []any{pool, pool}}
	msg := e.do(api.RoleOperator, http.MethodPatch, path, bad).apiError(t, http.StatusUnprocessableEntity)
	if !strings.Contains(msg, `StoragePools names lists "default" twice`) {
		t.Errorf("error %q", msg)
	}
	if got := e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK).json(t); !reflect.DeepEqual(got, want) {
		t.Errorf("pod after a refused patch:\n%v\nwant\n%v", got, want)
	}
}
