package store_test

import (
	"context"
	"fmt"
	"slices"
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
		wg.Go(func() { results[i], errs[i] = s.Enlist(ctx, rackPrincipal, bootReport(mac), store.EnlistOptions{}) })
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
	// Same SMBIOS UUID from another NIC of the same machine: matched, the MAC pending.
	res, err := s.Enlist(ctx, rackPrincipal, bootReport("52:54:00:aa:bb:02"), store.EnlistOptions{})
	if err != nil || res.Created || res.Machine != m.Uuid {
		t.Fatalf("second NIC: %+v, %v", res, err)
	}
	got := machinesWith(t, s, nil)
	if len(got) != 1 || len(got[0].HardwareAddrs) != 1 || !slices.Equal(pendingOf(got[0]), []string{"mac 52:54:00:aa:bb:02"}) {
		t.Fatalf("machines after the second NIC: %+v", got)
	}
}

// pendingOf lists m's pending identities as "kind value".
func pendingOf(m api.Machine) []string {
	var out []string
	if m.Enlisted != nil {
		for _, p := range m.Enlisted.Pending {
			out = append(out, p.Kind+" "+p.Value)
		}
	}
	return out
}

func getMachine(t *testing.T, s *store.Store, key string) api.Machine {
	t.Helper()
	var m api.Machine
	if err := s.Get(context.Background(), api.KindMachines, key, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// An operator declared bmcbox by its BMC address with an address and no MAC. A report that
// claims the BMC address with a MAC of its own (nothing vouches for either) gives the machine
// no MAC, so no reservation, and does not make it Ready: the MAC waits for the operator, who
// accepts the real machine's; the real machine then commissions through it.
func TestEnlistByBMCAloneProposesMACsAndMovesNoReservation(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	rack, _ := servedSubnet(t, s, "10.213.0.0/24")
	box := api.Machine{Name: "bmcbox", BMCAddress: "10.0.9.9", Address: "10.213.0.70"}
	mustCreate(t, s, api.KindMachines, &box)
	reservations := func() []api.Reservation {
		cfg, _, err := s.RackConfig(ctx, rack.Uuid)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Reservations
	}
	report := func(hostname, mac string) api.Enlistment {
		return api.Enlistment{Inventory: &api.Inventory{Hostname: hostname, BMCAddress: "10.0.9.9", Interfaces: []api.NetInterface{{Name: "eth0", MAC: mac}}}}
	}
	const rogue, real = "02:00:00:00:66:66", "52:54:00:09:09:01"

	res, err := s.Enlist(ctx, rackPrincipal, report("rogue", rogue), store.EnlistOptions{})
	if err != nil || res.Machine != box.Uuid || res.Status != api.StatusNew {
		t.Fatalf("report by the BMC address: %+v, %v; want bmcbox, New", res, err)
	}
	m := getMachine(t, s, box.Uuid)
	if len(m.HardwareAddrs) != 0 || len(reservations()) != 0 || !slices.Equal(pendingOf(m), []string{"mac " + rogue}) {
		t.Fatalf("after the report: MACs %v, pending %v, reservations %+v; want no MAC, the report's pending, no reservation",
			m.HardwareAddrs, pendingOf(m), reservations())
	}
	// What a report by an identity alone recorded stays: the next one only adds its MAC.
	if _, err := s.Enlist(ctx, rackPrincipal, report("bmcbox", real), store.EnlistOptions{}); err != nil {
		t.Fatal(err)
	}
	m = getMachine(t, s, box.Uuid)
	if m.Enlisted.Inventory.Hostname != "rogue" || !slices.Equal(pendingOf(m), []string{"mac " + rogue, "mac " + real}) {
		t.Fatalf("after the second report: inventory of %s, pending %v", m.Enlisted.Inventory.Hostname, pendingOf(m))
	}

	// The operator accepts the real MAC: it leaves Pending, and the reservation is its.
	m.HardwareAddrs = []string{real}
	if err := s.Replace(ctx, alice, api.KindMachines, m.Uuid, &m); err != nil {
		t.Fatal(err)
	}
	m = getMachine(t, s, box.Uuid)
	if rs := reservations(); len(rs) != 1 || rs[0].MAC != real || rs[0].Addr != box.Address || !slices.Equal(pendingOf(m), []string{"mac " + rogue}) {
		t.Fatalf("after accepting %s: reservations %+v, pending %v", real, rs, pendingOf(m))
	}
	res, err = s.Enlist(ctx, rackPrincipal, report("bmcbox", real), store.EnlistOptions{})
	if m = getMachine(t, s, box.Uuid); err != nil || res.Status != api.StatusReady || m.Enlisted.Inventory.Hostname != "bmcbox" {
		t.Fatalf("the real machine's report through its accepted MAC: %+v, %v, inventory %+v", res, err, m.Enlisted.Inventory)
	}
}

// A report through a declared machine's MAC that claims an SMBIOS UUID and serial gives the
// machine neither: a report with a copied MAC cannot lock the real machine out, whose own
// report is then taken too; an identity the machine holds is never replaced.
func TestEnlistNeverGivesAKnownMachineTheIdentitiesAReportClaims(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const mac = "52:54:00:0a:0a:01"
	victim := api.Machine{Name: "victim", HardwareAddrs: []string{mac}}
	mustCreate(t, s, api.KindMachines, &victim)
	forged := bootReport(mac)
	forged.Boot.UUID, forged.Boot.Serial = "11111111-2222-4333-8444-555555555555", "FORGED42"
	if _, err := s.Enlist(ctx, rackPrincipal, forged, store.EnlistOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Enlist(ctx, rackPrincipal, bootReport(mac), store.EnlistOptions{}); err != nil || res.Machine != victim.Uuid {
		t.Fatalf("the real machine's report after a forged one: %+v, %v", res, err)
	}
	m := getMachine(t, s, victim.Uuid)
	want := []string{"system-uuid 11111111-2222-4333-8444-555555555555", "serial " + store.SSNHash("FORGED42"),
		"system-uuid 4c4c4544-0042-3510-8051-b7c04f4e3732", "serial " + store.SSNHash("CZ1234XYZ")}
	if m.Fingerprint.SystemUUID != "" || m.Fingerprint.SSNHash != "" || !slices.Equal(pendingOf(m), want) {
		t.Fatalf("fingerprint %+v, pending %v; want none held, pending %v", m.Fingerprint, pendingOf(m), want)
	}

	m.Fingerprint.SystemUUID = "4c4c4544-0042-3510-8051-b7c04f4e3732"
	if err := s.Replace(ctx, alice, api.KindMachines, m.Uuid, &m); err != nil {
		t.Fatal(err)
	}
	before := jsonOf(t, getMachine(t, s, victim.Uuid))
	_, err := s.Enlist(ctx, rackPrincipal, forged, store.EnlistOptions{})
	wantErr(t, err, store.ErrConflict, "the machine has SMBIOS UUID 4c4c4544-0042-3510-8051-b7c04f4e3732")
	if after := jsonOf(t, getMachine(t, s, victim.Uuid)); after != before {
		t.Fatalf("a refused report changed the machine:\n%s\n%s", before, after)
	}
}

// Reports may not grow a machine's pending identities without bound.
func TestEnlistRefusesMorePendingThanAMachineHolds(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	box := api.Machine{Name: "bmcbox", BMCAddress: "10.0.9.9"}
	mustCreate(t, s, api.KindMachines, &box)
	report := func(first int) api.Enlistment {
		inv := &api.Inventory{BMCAddress: "10.0.9.9"}
		for i := range api.MaxEnlistMACs {
			inv.Interfaces = append(inv.Interfaces, api.NetInterface{Name: "eth", MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", (first+i)/256, (first+i)%256)})
		}
		return api.Enlistment{Inventory: inv}
	}
	for first := 0; first < api.MaxEnlistPending; first += api.MaxEnlistMACs {
		if _, err := s.Enlist(ctx, rackPrincipal, report(first), store.EnlistOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := jsonOf(t, getMachine(t, s, box.Uuid))
	_, err := s.Enlist(ctx, rackPrincipal, report(api.MaxEnlistPending), store.EnlistOptions{})
	wantErr(t, err, store.ErrConflict, "pending MACs and identities, the most it may")
	if after := jsonOf(t, getMachine(t, s, box.Uuid)); after != before {
		t.Fatalf("a refused report changed the machine")
	}
	// Nor may an operator write more, or of a kind no report has.
	m := getMachine(t, s, box.Uuid)
	m.Enlisted.Pending = append(m.Enlisted.Pending, api.PendingIdentity{Kind: api.IdentityMAC, Value: "02:00:00:00:ff:ff"})
	wantErr(t, s.Replace(ctx, alice, api.KindMachines, m.Uuid, &m), store.ErrInvalid, "at most 64")
	m.Enlisted.Pending = []api.PendingIdentity{{Kind: "colour", Value: "red"}}
	wantErr(t, s.Replace(ctx, alice, api.KindMachines, m.Uuid, &m), store.ErrInvalid, `kind "colour"`)
}

// A BIOS iPXE reports buildarch i386 whatever the CPU (QEMU's x86_64 machine did): the boot
// report leaves Arch unset, and the discovery environment's inventory sets it.
func TestEnlistArchOfABIOSIPXEComesFromTheInventory(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const mac = "52:54:00:aa:bb:03"
	boot := bootReport(mac)
	boot.Boot.BuildArch, boot.Boot.Platform = "i386", "pcbios"
	res, err := s.Enlist(ctx, rackPrincipal, boot, store.EnlistOptions{})
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
	if _, err := s.Enlist(ctx, rackPrincipal, inv, store.EnlistOptions{}); err != nil {
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
	// Matched by the BMC address alone, the report is recorded but does not commission the
	// machine: its MACs wait for the operator (TestEnlistByBMCAloneProposesMACsAndMovesNoReservation).
	res, err := s.Enlist(ctx, alice, inv("52:54:00:00:00:a1", "52:54:00:00:00:a2", "10.0.0.21"), store.EnlistOptions{})
	if err != nil || res.Created || res.Machine != byBMC.Uuid || res.Status != api.StatusNew {
		t.Fatalf("by BMC: %+v, %v", res, err)
	}
	res, err = s.Enlist(ctx, alice, inv("52:54:00:00:00:b1", "52:54:00:00:00:b2", ""), store.EnlistOptions{})
	if err != nil || res.Created || res.Machine != byMAC.Uuid {
		t.Fatalf("by non-PXE MAC: %+v, %v", res, err)
	}
	var got api.Machine
	if err := s.Get(ctx, api.KindMachines, byMAC.Uuid, &got); err != nil {
		t.Fatal(err)
	}
	if got.Enlisted == nil || got.Enlisted.Inventory == nil || got.Enlisted.Inventory.MemoryMiB != 4096 ||
		len(got.Enlisted.Commissioning) != 1 || len(got.HardwareAddrs) != 1 || !slices.Equal(pendingOf(got), []string{"mac 52:54:00:00:00:b1"}) {
		t.Fatalf("declared machine after enlistment: %+v", got)
	}
	// A Ready machine's inventory stays until an operator asks for commissioning again.
	_, err = s.Enlist(ctx, alice, inv("52:54:00:00:00:b1", "52:54:00:00:00:b2", ""), store.EnlistOptions{})
	wantErr(t, err, store.ErrConflict, "set its Status to New")
	got.Status = api.StatusNew
	if err := s.Replace(ctx, alice, api.KindMachines, got.Uuid, &got); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Enlist(ctx, alice, inv("52:54:00:00:00:b1", "52:54:00:00:00:b2", ""), store.EnlistOptions{}); err != nil || res.Status != api.StatusReady {
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
	_, err := s.Enlist(ctx, rackPrincipal, both, store.EnlistOptions{})
	wantErr(t, err, store.ErrConflict, "belong to 2 machines")

	otherBMC := api.Enlistment{Inventory: &api.Inventory{BMCAddress: "10.0.0.9", Interfaces: []api.NetInterface{{Name: "a", MAC: "52:54:00:00:01:01"}}}}
	_, err = s.Enlist(ctx, rackPrincipal, otherBMC, store.EnlistOptions{})
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
		"disk serial with control chars": {Inventory: &api.Inventory{Interfaces: []api.NetInterface{{MAC: "52:54:00:00:00:01"}},
			Disks: []api.Disk{{Name: "sda", Serial: "S4EM\x1b[2J"}}}},
		"huge output": {Inventory: &api.Inventory{Interfaces: []api.NetInterface{{MAC: "52:54:00:00:00:01"}}},
			Commissioning: []api.CommissioningResult{{Script: "x", Output: string(make([]byte, api.MaxCommissionOutput+1))}}},
	} {
		if _, err := s.Enlist(ctx, rackPrincipal, e, store.EnlistOptions{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if ms := machinesWith(t, s, nil); len(ms) != 0 {
		t.Fatalf("garbage created %d machines", len(ms))
	}
}

// Past MaxNew New machines a report that would create one is refused (ErrFull) and changes
// nothing; reports of the machines already there are still taken, and commissioning one
// makes room.
func TestEnlistRefusesNewMachinesPastTheCap(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	capped := store.EnlistOptions{MaxNew: 2}
	var first api.EnlistResult
	for i, mac := range []string{"52:54:00:0c:00:01", "52:54:00:0c:00:02"} {
		res, err := s.Enlist(ctx, rackPrincipal, api.Enlistment{Boot: &api.BootFacts{MAC: mac}}, capped)
		if err != nil || !res.Created {
			t.Fatalf("report %d: %+v, %v", i, res, err)
		}
		if i == 0 {
			first = res
		}
	}
	before := snapshot(t, s)
	_, err := s.Enlist(ctx, rackPrincipal, api.Enlistment{Boot: &api.BootFacts{MAC: "52:54:00:0c:00:03"}}, capped)
	wantErr(t, err, store.ErrFull, "holds 2 New machines")
	if after := snapshot(t, s); after != before {
		t.Fatal("a report refused by the cap changed the database")
	}
	inv := api.Enlistment{Inventory: &api.Inventory{Interfaces: []api.NetInterface{{Name: "eth0", MAC: "52:54:00:0c:00:01"}}}}
	if res, err := s.Enlist(ctx, rackPrincipal, inv, capped); err != nil || res.Machine != first.Machine || res.Status != api.StatusReady {
		t.Fatalf("commissioning a New machine at the cap: %+v, %v", res, err)
	}
	if res, err := s.Enlist(ctx, rackPrincipal, api.Enlistment{Boot: &api.BootFacts{MAC: "52:54:00:0c:00:03"}}, capped); err != nil || !res.Created {
		t.Fatalf("a new machine once one was commissioned: %+v, %v", res, err)
	}
}

// A report that matched a machine by its SMBIOS UUID alone ties it to no rack (a rack
// transfer would take it along) and records its boot facts only while the machine has none.
func TestEnlistByAnIdentityAloneTiesNoRack(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	box := api.Machine{Name: "uuidbox", Fingerprint: api.Fingerprint{SystemUUID: "4c4c4544-0042-3510-8051-b7c04f4e3732"}}
	mustCreate(t, s, api.KindMachines, &box)
	for _, mac := range []string{"02:00:00:00:66:01", "02:00:00:00:66:02"} {
		report := bootReport(mac)
		report.Boot.Rack = rackA
		if res, err := s.Enlist(ctx, rackPrincipal, report, store.EnlistOptions{}); err != nil || res.Machine != box.Uuid {
			t.Fatalf("report of %s: %+v, %v", mac, res, err)
		}
	}
	m := getMachine(t, s, box.Uuid)
	if m.Rack != "" || m.Enlisted.Boot.MAC != "02:00:00:00:66:01" || len(m.HardwareAddrs) != 0 ||
		!slices.Equal(pendingOf(m), []string{"serial " + store.SSNHash("CZ1234XYZ"), "mac 02:00:00:00:66:01", "mac 02:00:00:00:66:02"}) {
		t.Fatalf("uuidbox: Rack %q, boot facts of %s, MACs %v, pending %v; want no rack, the first report's facts, no MAC, all pending",
			m.Rack, m.Enlisted.Boot.MAC, m.HardwareAddrs, pendingOf(m))
	}
}
