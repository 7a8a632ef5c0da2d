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

// A machine added by its BMC and being commissioned PXE-boots unknown by MAC: iPXE's report
// creates a New placeholder, and its agent's report names both. The placeholder is folded
// into the machine being commissioned, which takes the report; the same pair is refused
// while that machine is not being commissioned.
func TestEnlistFoldsTheBootPlaceholderOfAMachineBeingCommissioned(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	rack, _, err := s.RegisterRack(ctx, api.RackRegistration{Name: "rack-1"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:09:09:02"
	box := api.Machine{Name: "bmcbox", BMCAddress: "10.0.9.9", Rack: rack.Uuid, Status: api.StatusNew}
	mustCreate(t, s, api.KindMachines, &box)
	boot := bootReport(mac)
	boot.Boot.Rack = rack.Uuid
	placeholder, err := s.Enlist(ctx, rackPrincipal, boot, store.EnlistOptions{})
	if err != nil || !placeholder.Created {
		t.Fatalf("iPXE's report: %+v, %v; want a New placeholder", placeholder, err)
	}
	agent := api.Enlistment{Inventory: &api.Inventory{Hostname: "real", BMCAddress: "10.0.9.9", Interfaces: []api.NetInterface{{Name: "eth0", MAC: mac}}}}
	_, err = s.Enlist(ctx, rackPrincipal, agent, store.EnlistOptions{})
	wantErr(t, err, store.ErrConflict, "belong to 2 machines")

	by := store.Principal{User: store.RackUser(rack.Uuid), Role: api.RoleRack}
	if _, err := s.SetCommissioning(ctx, by, rack.Uuid, box.Uuid, api.CommissionReport{Status: api.StatusCommissioning}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Enlist(ctx, rackPrincipal, agent, store.EnlistOptions{})
	if err != nil || res.Machine != box.Uuid {
		t.Fatalf("the agent's report while bmcbox is commissioned: %+v, %v; want bmcbox", res, err)
	}
	if m := getMachine(t, s, box.Uuid); m.Enlisted == nil || m.Enlisted.Inventory == nil || m.Enlisted.Inventory.Hostname != "real" {
		t.Fatalf("bmcbox's enlistment %+v, want the agent's inventory", m.Enlisted)
	}
	var gone api.Machine
	wantErr(t, s.Get(ctx, api.KindMachines, placeholder.Machine, &gone), store.ErrNotFound, "")
}
