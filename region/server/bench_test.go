package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/region/api"
)

// The benchmarks measure whole HTTP round trips on 127.0.0.1 against a real PostgreSQL:
// authentication (one token lookup), the permission check and the store call.

func BenchmarkShowMachine(b *testing.B) {
	e := newEnv(b)
	m := e.create(api.KindMachines, map[string]any{"Name": "birdy", "HardwareAddrs": []string{"52:54:00:aa:bb:cc"}})
	path := "/api/v1/machines/" + m["Uuid"].(string)
	for b.Loop() {
		e.mustDo(api.RoleReadonly, http.MethodGet, path, nil, http.StatusOK)
	}
}

func BenchmarkCreateProfile(b *testing.B) {
	e := newEnv(b)
	i := 0
	for b.Loop() {
		i++
		e.mustDo(api.RoleOperator, http.MethodPost, "/api/v1/profiles", map[string]any{"Name": fmt.Sprintf("p%d", i)}, http.StatusCreated)
	}
}

func BenchmarkPatchMachine(b *testing.B) {
	e := newEnv(b)
	benchmarkPatch(b, e, e.create(api.KindMachines, map[string]any{"Name": "birdy"}))
}

// BenchmarkPatchMachineBehindRack is the write a rack move could hold (a machine tied to a
// rack), with no rack paused: what every such write pays for the check.
func BenchmarkPatchMachineBehindRack(b *testing.B) {
	e := newEnv(b)
	rack := e.create(api.KindRacks, map[string]any{"Name": "rack-a", "Status": api.RackOnline})["Uuid"].(string)
	benchmarkPatch(b, e, e.create(api.KindMachines, map[string]any{"Name": "birdy", "Rack": rack}))
}

func benchmarkPatch(b *testing.B, e *env, machine map[string]any) {
	path := "/api/v1/machines/" + machine["Uuid"].(string)
	i := 0
	for b.Loop() {
		i++
		e.mustDo(api.RoleOperator, http.MethodPatch, path, map[string]any{"Description": fmt.Sprint(i)}, http.StatusOK)
	}
}
