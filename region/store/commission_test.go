package store_test

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// A commissioning report is taken for the rack's own machine only; its start drops the
// machine's inventory, Ready needs one reported since, and a failure needs its reason. Every
// refusal changes nothing.
func TestSetCommissioningConfinesTheRackAndNeedsAFreshInventory(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	rack, _, err := s.RegisterRack(ctx, api.RackRegistration{Name: "rack-1"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	by := store.Principal{User: store.RackUser(rack.Uuid), Role: api.RoleRack}
	box := api.Machine{Name: "bmcbox", BMCAddress: "10.0.9.9", Rack: rack.Uuid}
	mustCreate(t, s, api.KindMachines, &box)
	report := api.Enlistment{Inventory: &api.Inventory{Hostname: "old", BMCAddress: "10.0.9.9", Interfaces: []api.NetInterface{{Name: "eth0", MAC: "52:54:00:09:09:01"}}}}
	if _, err := s.Enlist(ctx, rackPrincipal, report, store.EnlistOptions{}); err != nil {
		t.Fatal(err)
	}

	before := snapshot(t, s)
	_, err = s.SetCommissioning(ctx, by, rackB, box.Uuid, api.CommissionReport{Status: api.StatusCommissioning})
	wantErr(t, err, store.ErrForbidden, "not a machine of rack "+rackB)
	_, err = s.SetCommissioning(ctx, by, rack.Uuid, box.Uuid, api.CommissionReport{Status: "Deployed"})
	wantErr(t, err, store.ErrInvalid, `commissioning status "Deployed"`)
	_, err = s.SetCommissioning(ctx, by, rack.Uuid, box.Uuid, api.CommissionReport{Status: api.StatusFailedCommissioning})
	wantErr(t, err, store.ErrInvalid, "says why in Reason")
	if after := snapshot(t, s); after != before {
		t.Fatal("a refused commissioning report changed the store")
	}

	m, err := s.SetCommissioning(ctx, by, rack.Uuid, box.Uuid, api.CommissionReport{Status: api.StatusCommissioning, Workflow: "commission-machine/" + box.Uuid})
	if err != nil || m.Status != api.StatusCommissioning || m.Enlisted == nil || m.Enlisted.Inventory != nil {
		t.Fatalf("start: %+v, %v; want Commissioning without the old inventory", m.Enlisted, err)
	}
	_, err = s.SetCommissioning(ctx, by, rack.Uuid, box.Uuid, api.CommissionReport{Status: api.StatusReady})
	wantErr(t, err, store.ErrConflict, "reported no inventory since its commissioning started")

	report.Inventory.Hostname = "new"
	if _, err := s.Enlist(ctx, rackPrincipal, report, store.EnlistOptions{}); err != nil {
		t.Fatal(err)
	}
	if m, err = s.SetCommissioning(ctx, by, rack.Uuid, box.Uuid, api.CommissionReport{Status: api.StatusReady}); err != nil || m.Status != api.StatusReady || m.Enlisted.Inventory.Hostname != "new" {
		t.Fatalf("Ready: %+v, %v", m, err)
	}
	m, err = s.SetCommissioning(ctx, by, rack.Uuid, box.Uuid, api.CommissionReport{Status: api.StatusFailedCommissioning, Reason: "power off: BMC unreachable"})
	if err != nil || m.Status != api.StatusFailedCommissioning || m.StatusReason != "power off: BMC unreachable" {
		t.Fatalf("failure: %q (%q), %v", m.Status, m.StatusReason, err)
	}
}
