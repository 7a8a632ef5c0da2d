package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// rackNetwork creates, as admin, a rack serving a VLAN with one subnet and hosting a pod,
// with a machine behind it; it returns the rack's UUID and the machine's.
func (e *env) rackNetwork() (rack, machine string) {
	e.t.Helper()
	rack = e.create(api.KindRacks, map[string]any{"Name": "rack-a", "Status": api.RackOnline})["Uuid"].(string)
	fabric := e.create(api.KindFabrics, map[string]any{"Name": "fabric-a"})["Uuid"].(string)
	vlan := e.create(api.KindVLANs, map[string]any{"Name": "vlan-a", "Fabric": fabric, "VID": 0, "DHCPOn": true, "PrimaryRack": rack})["Uuid"].(string)
	e.create(api.KindSubnets, map[string]any{"Name": "net-a", "CIDR": "10.42.0.0/24", "VLAN": vlan})
	e.create(api.KindPods, map[string]any{"Name": "kvm-a", "Rack": rack})
	machine = e.create(api.KindMachines, map[string]any{"Name": "node-1", "Rack": rack, "HardwareAddrs": []string{"52:54:00:42:00:01"}})["Uuid"].(string)
	return rack, machine
}

func statusOf(err error) int {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

// The whole rack hand-over over HTTP between two regions, through the region client.
func TestRackTransferEndpoints(t *testing.T) {
	src, dst := newEnv(t), newEnv(t)
	ctx := context.Background()
	a, b := client.New(src.base, src.tokens[api.RoleOperator]), client.New(dst.base, dst.tokens[api.RoleOperator])
	rack, machine := src.rackNetwork()

	if _, err := a.QueueRackOperation(ctx, rack, api.PendingOperation{Target: machine, Kind: "power-on"}); statusOf(err) != http.StatusConflict {
		t.Fatalf("queue on a rack that is not paused: %v, want 409", err)
	}
	if r, err := a.PauseRack(ctx, rack, api.RackHold{}); err != nil || r.Status != api.RackPaused {
		t.Fatalf("pause: %+v, %v", r, err)
	}
	op, err := a.QueueRackOperation(ctx, rack, api.PendingOperation{Target: machine, Kind: "power-on"})
	if err != nil || op.ID == 0 {
		t.Fatalf("queue: %+v, %v", op, err)
	}
	bundle, err := a.ExportRack(ctx, rack)
	if err != nil || len(bundle.Subnets) != 1 || len(bundle.Pods) != 1 || len(bundle.Machines) != 1 {
		t.Fatalf("export: %+v, %v", bundle, err)
	}
	if c, err := b.CheckRackImport(ctx, bundle); err != nil || len(c.Conflicts) != 0 {
		t.Fatalf("check: %+v, %v", c, err)
	}
	if res, err := b.ImportRack(ctx, bundle); err != nil || res.Created != 5 {
		t.Fatalf("import: %+v, %v", res, err)
	}
	if err := b.UndoRackImport(ctx, rack); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Racks().Get(ctx, rack); statusOf(err) != http.StatusNotFound {
		t.Fatalf("rack on the target after undo: %v, want 404", err)
	}
	if _, err := b.ImportRack(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	if err := a.HandOverRack(ctx, rack); err != nil {
		t.Fatalf("hand-over: %v", err)
	}
	if _, err := a.Racks().Get(ctx, rack); statusOf(err) != http.StatusNotFound {
		t.Fatalf("rack on the source after hand-over: %v, want 404", err)
	}
	queued, err := a.RackOperations(ctx, rack)
	if err != nil || len(queued) != 1 {
		t.Fatalf("operations on the source: %+v, %v", queued, err)
	}
	released, err := client.New(dst.base, dst.tokens[api.RoleAdmin], client.AsMove()).ReleaseRackOperations(ctx, rack, api.OperationsRelease{Origin: "source", Operations: queued})
	if err != nil || len(released) != 1 || !released[0].Released || released[0].Target != machine {
		t.Fatalf("release: %+v, %v", released, err)
	}
	if r, err := b.UnpauseRack(ctx, rack); err != nil || r.Status == api.RackPaused {
		t.Fatalf("unpause: %+v, %v", r, err)
	}
}

func TestRackTransferConflictsAndPermissions(t *testing.T) {
	src, dst := newEnv(t), newEnv(t)
	rack, _ := src.rackNetwork()
	bundle := src.mustDo(api.RoleReadonly, http.MethodGet, "/api/v1/racks/"+rack+"/export", nil, http.StatusOK).json(t)
	dst.create(api.KindSubnets, map[string]any{"Name": "taken", "CIDR": "10.42.0.0/24"})
	check := dst.mustDo(api.RoleReadonly, http.MethodPost, "/api/v1/racks/import/check", bundle, http.StatusOK).json(t)
	if c := check["Conflicts"].([]any); len(c) != 1 || !strings.Contains(c[0].(string), "subnet 10.42.0.0/24 exists as subnet taken") {
		t.Errorf("conflicts %v", c)
	}
	msg := dst.do(api.RoleOperator, http.MethodPost, "/api/v1/racks/import", bundle).apiError(t, http.StatusConflict)
	if !strings.Contains(msg, "subnet 10.42.0.0/24") {
		t.Errorf("import refusal %q does not name the subnet", msg)
	}
	cases := []struct {
		role, method, path string
		code               int
	}{
		{api.RoleReadonly, http.MethodPost, "/racks/" + rack + "/pause", http.StatusForbidden},
		{api.RoleReadonly, http.MethodPost, "/racks/" + rack + "/hand-over", http.StatusForbidden},
		{api.RoleRack, http.MethodGet, "/racks/" + rack + "/export", http.StatusForbidden},
		{api.RoleRack, http.MethodPost, "/racks/" + rack + "/pause", http.StatusForbidden},
		{api.RoleRack, http.MethodGet, "/racks/" + rack + "/operations", http.StatusForbidden},
		{"", http.MethodGet, "/racks/" + rack + "/export", http.StatusUnauthorized},
		{api.RoleOperator, http.MethodPost, "/racks/not-a-uuid/pause", http.StatusUnprocessableEntity},
		{api.RoleOperator, http.MethodPost, "/racks/aaaaaaaa-0000-4000-8000-0000000000ff/pause", http.StatusNotFound},
		{api.RoleOperator, http.MethodPost, "/racks/" + rack + "/hand-over", http.StatusConflict}, // not paused
	}
	for _, c := range cases {
		t.Run(c.role+" "+c.method+" "+c.path, func(t *testing.T) {
			src.do(c.role, c.method, "/api/v1"+c.path, nil).apiError(t, c.code)
		})
	}
	var rk api.Rack
	if err := src.st.Get(context.Background(), api.KindRacks, rack, &rk); err != nil || rk.Status != api.RackOnline {
		t.Errorf("rack after refused calls: %+v, %v", rk, err)
	}
}
