package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

var rackPrincipal = store.Principal{User: store.RackUser(rackA), Role: api.RoleRack}

func bootReport(mac string) api.Enlistment {
	return api.Enlistment{Boot: &api.BootFacts{MAC: mac, UUID: "4C4C4544-0042-3510-8051-B7C04F4E3732", Serial: "CZ1234XYZ",
		Manufacturer: "Dell Inc.", Product: "PowerEdge R640", BuildArch: "x86_64", Platform: "efi"}}
}

func machinesWith(t *testing.T, s *store.Store, filters map[string]string) []api.Machine {
	t.Helper()
	var ms []api.Machine
	if err := s.List(context.Background(), api.KindMachines, store.ListOptions{Filters: filters}, &ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// The same machine reported by many racks at once is created once, New in discovery, with
// the reported facts; later reports match it.
func TestEnlistCreatesOneNewMachineUnderConcurrentReports(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const mac = "52:54:00:aa:bb:01"
	var wg sync.WaitGroup
	results := make([]api.EnlistResult, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = s.Enlist(ctx, rackPrincipal, bootReport(mac)) })
	}
	wg.Wait()
	created := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		if results[i].Created {
			created++
		}
		if results[i].Machine != results[0].Machine {
			t.Fatalf("report %d matched %s, report 0 %s", i, results[i].Machine, results[0].Machine)
		}
	}
	if created != 1 {
		t.Fatalf("%d reports created a machine, want 1", created)
	}
	ms := machinesWith(t, s, map[string]string{"HardwareAddrs": mac})
	if len(ms) != 1 {
		t.Fatalf("%d machines hold %s", len(ms), mac)
	}
	m := ms[0]
	if m.Status != api.StatusNew || m.Stage != api.EnlistStage || m.BootEnv != api.EnlistStage || m.Arch != "amd64" {
		t.Errorf("machine %+v: want Status New, Stage and BootEnv discovery, Arch amd64", m)
	}
	if m.Fingerprint.SystemUUID != "4c4c4544-0042-3510-8051-b7c04f4e3732" || m.Fingerprint.SSNHash != store.SSNHash("CZ1234XYZ") {
		t.Errorf("fingerprint %+v", m.Fingerprint)
	}
	if m.Enlisted == nil || m.Enlisted.Boot == nil || m.Enlisted.Boot.Product != "PowerEdge R640" || m.Enlisted.Boot.Platform != "efi" {
		t.Errorf("enlisted %+v", m.Enlisted)
	}
	// Same SMBIOS UUID from another NIC of the same machine: matched, the MAC added.
	res, err := s.Enlist(ctx, rackPrincipal, bootReport("52:54:00:aa:bb:02"))
	if err != nil || res.Created || res.Machine != m.Uuid {
		t.Fatalf("second NIC: %+v, %v", res, err)
	}
	if got := machinesWith(t, s, nil); len(got) != 1 || len(got[0].HardwareAddrs) != 2 {
		t.Fatalf("machines after the second NIC: %+v", got)
	}
}

// A BIOS iPXE reports buildarch i386 whatever the CPU (QEMU's x86_64 machine did): the boot
// report leaves Arch unset, and the discovery environment's inventory sets it.
func TestEnlistArchOfABIOSIPXEComesFromTheInventory(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const mac = "52:54:00:aa:bb:03"
	boot := bootReport(mac)
	boot.Boot.BuildArch, boot.Boot.Platform = "i386", "pcbios"
	res, err := s.Enlist(ctx, rackPrincipal, boot)
	if err != nil || !res.Created {
		t.Fatalf("boot report: %+v, %v", res, err)
	}
	arch := func() string {
		var m api.Machine
		if err := s.Get(ctx, api.KindMachines, res.Machine, &m); err != nil {
			t.Fatal(err)
		}
		return m.Arch
	}
	if got := arch(); got != "" {
		t.Fatalf("Arch %q after a BIOS iPXE's report, want it unset", got)
	}
	inv := api.Enlistment{Inventory: &api.Inventory{Arch: "amd64", Interfaces: []api.NetInterface{{Name: "ens3", MAC: mac}}}}
	if _, err := s.Enlist(ctx, rackPrincipal, inv); err != nil {
		t.Fatal(err)
	}
	if got := arch(); got != "amd64" {
		t.Fatalf("Arch %q after the inventory, want amd64", got)
	}
}

// An operator declares a machine by its BMC address only, or by a MAC that never PXE boots;
// the discovery environment's inventory matches it.
func TestEnlistMatchesDeclaredByBMCOrNonPXEMAC(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	byBMC := api.Machine{Name: "declared-bmc", BMCAddress: "10.0.0.21"}
	mustCreate(t, s, api.KindMachines, &byBMC)
	byMAC := api.Machine{Name: "declared-mac", HardwareAddrs: []string{"52:54:00:00:00:b2"}}
	mustCreate(t, s, api.KindMachines, &byMAC)

	inv := func(pxe, other, bmc string) api.Enlistment {
		return api.Enlistment{Inventory: &api.Inventory{Arch: "amd64", BMCAddress: bmc, MemoryMiB: 4096,
			Interfaces: []api.NetInterface{{Name: "eno1", MAC: pxe}, {Name: "eno2", MAC: other}}},
			Commissioning: []api.CommissioningResult{{Script: "lsblk", Output: "sda 10G\n"}}}
	}
	res, err := s.Enlist(ctx, alice, inv("52:54:00:00:00:a1", "52:54:00:00:00:a2", "10.0.0.21"))
	if err != nil || res.Created || res.Machine != byBMC.Uuid || res.Status != api.StatusReady {
		t.Fatalf("by BMC: %+v, %v", res, err)
	}
	res, err = s.Enlist(ctx, alice, inv("52:54:00:00:00:b1", "52:54:00:00:00:b2", ""))
	if err != nil || res.Created || res.Machine != byMAC.Uuid {
		t.Fatalf("by non-PXE MAC: %+v, %v", res, err)
	}
	var got api.Machine
	if err := s.Get(ctx, api.KindMachines, byMAC.Uuid, &got); err != nil {
		t.Fatal(err)
	}
	if got.Enlisted == nil || got.Enlisted.Inventory == nil || got.Enlisted.Inventory.MemoryMiB != 4096 ||
		len(got.Enlisted.Commissioning) != 1 || len(got.HardwareAddrs) != 2 {
		t.Fatalf("declared machine after enlistment: %+v", got)
	}
	// A Ready machine's inventory stays until an operator asks for commissioning again.
	_, err = s.Enlist(ctx, alice, inv("52:54:00:00:00:b1", "52:54:00:00:00:b2", ""))
	wantErr(t, err, store.ErrConflict, "set its Status to New")
	got.Status = api.StatusNew
	if err := s.Replace(ctx, alice, api.KindMachines, got.Uuid, &got); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Enlist(ctx, alice, inv("52:54:00:00:00:b1", "52:54:00:00:00:b2", "")); err != nil || res.Status != api.StatusReady {
		t.Fatalf("commissioning again: %+v, %v", res, err)
	}
}

// A report whose MACs belong to two machines is refused with an audit event and changes
// nothing; so is one that contradicts the matched machine's BMC address.
func TestEnlistRefusesConflictingIdentities(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	one := api.Machine{Name: "one", HardwareAddrs: []string{"52:54:00:00:01:01"}, BMCAddress: "10.0.0.1"}
	two := api.Machine{Name: "two", HardwareAddrs: []string{"52:54:00:00:02:01"}}
	mustCreate(t, s, api.KindMachines, &one)
	mustCreate(t, s, api.KindMachines, &two)
	before := jsonOf(t, machinesWith(t, s, nil))

	both := api.Enlistment{Inventory: &api.Inventory{Interfaces: []api.NetInterface{
		{Name: "a", MAC: "52:54:00:00:01:01"}, {Name: "b", MAC: "52:54:00:00:02:01"}}}}
	_, err := s.Enlist(ctx, rackPrincipal, both)
	wantErr(t, err, store.ErrConflict, "belong to 2 machines")

	otherBMC := api.Enlistment{Inventory: &api.Inventory{BMCAddress: "10.0.0.9", Interfaces: []api.NetInterface{{Name: "a", MAC: "52:54:00:00:01:01"}}}}
	_, err = s.Enlist(ctx, rackPrincipal, otherBMC)
	wantErr(t, err, store.ErrConflict, "BMC address 10.0.0.1")

	if after := jsonOf(t, machinesWith(t, s, nil)); after != before {
		t.Fatalf("a refused enlistment changed machines:\n%s\n%s", before, after)
	}
	evs, err := s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": api.KindMachines}})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range evs {
		if e.Action == "enlist-refused" {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("%d enlist-refused events, want 2", refused)
	}
	// Two machines may not be declared with one BMC address, whoever writes.
	three := api.Machine{Name: "three", BMCAddress: "10.0.0.1"}
	wantErr(t, s.Create(ctx, alice, api.KindMachines, &three), store.ErrConflict, "belongs to machine one")
}

func TestEnlistRefusesGarbage(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	long := make([]byte, api.MaxEnlistValue+1)
	for i := range long {
		long[i] = 'x'
	}
	for name, e := range map[string]api.Enlistment{
		"empty":         {},
		"bad MAC":       {Boot: &api.BootFacts{MAC: "zz"}},
		"bad UUID":      {Boot: &api.BootFacts{MAC: "52:54:00:00:00:01", UUID: "nope"}},
		"control chars": {Boot: &api.BootFacts{MAC: "52:54:00:00:00:01", Product: "a\x1b[2Jb"}},
		"too long":      {Boot: &api.BootFacts{MAC: "52:54:00:00:00:01", Serial: string(long)}},
		"bad arch":      {Boot: &api.BootFacts{MAC: "52:54:00:00:00:01", BuildArch: "x86 64; rm"}},
		"huge output": {Inventory: &api.Inventory{Interfaces: []api.NetInterface{{MAC: "52:54:00:00:00:01"}}},
			Commissioning: []api.CommissioningResult{{Script: "x", Output: string(make([]byte, api.MaxCommissionOutput+1))}}},
	} {
		if _, err := s.Enlist(ctx, rackPrincipal, e); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if ms := machinesWith(t, s, nil); len(ms) != 0 {
		t.Fatalf("garbage created %d machines", len(ms))
	}
}
