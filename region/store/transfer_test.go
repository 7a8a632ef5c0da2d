package store_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

const (
	mach2 = "3a000000-0000-4000-8000-000000000002"
	pod1  = "90000000-0000-4000-8000-000000000001"
)

// rackFixtures is fixtures plus what moves with rack-a: a machine behind it in pool "gold",
// a pod it hosts and an active lease of its subnet.
func rackFixtures(t *testing.T, s *store.Store) {
	t.Helper()
	fixtures(t, s)
	mustCreate(t, s, api.KindPools, &api.Pool{Name: "gold", Description: "rack-a machines"})
	mustCreate(t, s, api.KindMachines, &api.Machine{Uuid: mach2, Name: "m2", Pool: "gold", Rack: rackA, Address: "10.0.0.12",
		HardwareAddrs: []string{"52:54:00:aa:bb:02"}})
	mustCreate(t, s, api.KindPods, &api.Pod{Uuid: pod1, Name: "kvm-1", Type: "virsh", Rack: rackA, Arch: "ppc64le",
		StoragePools: []api.PodStoragePool{{Name: "default", Type: "dir", Path: "/var/lib/libvirt/images", Active: true, CapacityBytes: 100 << 30, AllocationBytes: 30 << 30, AvailableBytes: 70 << 30}},
		Networks:     []api.PodNetwork{{Name: "default", Bridge: "virbr0", Active: true}}})
	mustCreate(t, s, api.KindLeases, &api.Lease{Addr: "10.0.0.12", MAC: "52:54:00:aa:bb:02", Subnet: subnet1, Rack: rackA,
		State: "active", Start: time.Now().UTC(), Expires: time.Now().Add(time.Hour).UTC()})
}

func TestPauseRackSurvivesHeartbeats(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	rackFixtures(t, s)
	anyPaused := func(want bool) {
		t.Helper()
		if got, err := s.AnyRackPaused(ctx); err != nil || got != want {
			t.Fatalf("AnyRackPaused = %v, %v; want %v", got, err, want)
		}
	}
	anyPaused(false)
	r, err := s.PauseRack(ctx, alice, rackA, api.RackHold{})
	if err != nil || r.Status != api.RackPaused {
		t.Fatalf("PauseRack: %+v, %v", r, err)
	}
	if r, err = s.RackHeartbeat(ctx, rackA, api.RackHeartbeat{}); err != nil || r.Status != api.RackPaused {
		t.Fatalf("heartbeat of a paused rack: %+v, %v", r, err)
	}
	anyPaused(true)
	if r, err = s.UnpauseRack(ctx, alice, rackA); err != nil || r.Status != api.RackOnline {
		t.Fatalf("UnpauseRack: %+v, %v", r, err)
	}
	anyPaused(false)
	_, err = s.PauseRack(ctx, alice, rackB, api.RackHold{})
	wantErr(t, err, store.ErrNotFound, rackB)
}

func TestExportRack(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	rackFixtures(t, s)
	b, err := s.ExportRack(ctx, rackA)
	if err != nil {
		t.Fatal(err)
	}
	got := []int{len(b.Fabrics), len(b.VLANs), len(b.Subnets), len(b.Pods), len(b.Leases), len(b.Machines)}
	if !slices.Equal(got, []int{1, 1, 1, 1, 1, 1}) || b.Machines[0].Uuid != mach2 || b.Rack.Uuid != rackA {
		t.Errorf("bundle counts %v (fabrics, vlans, subnets, pods, leases, machines), machines %+v", got, b.Machines)
	}
	if len(b.Pools) != 1 || b.Pools[0].Name != "gold" || b.Pools[0].Description != "rack-a machines" {
		t.Errorf("pools %+v, want gold", b.Pools)
	}

	// A VLAN shared with another rack cannot move with one of them.
	mustCreate(t, s, api.KindRacks, &api.Rack{Uuid: rackB, Name: "rack-b", Status: api.RackOnline})
	var v api.VLAN
	if err := s.Get(ctx, api.KindVLANs, vlan1, &v); err != nil {
		t.Fatal(err)
	}
	v.SecondaryRack = rackB
	if err := s.Replace(ctx, alice, api.KindVLANs, vlan1, &v); err != nil {
		t.Fatal(err)
	}
	_, err = s.ExportRack(ctx, rackA)
	wantErr(t, err, store.ErrConflict, "shares vlan v10")
}

func TestImportRackConflictsAreNamedAndChangeNothing(t *testing.T) {
	src, _ := newStore(t)
	dst, _ := newStore(t)
	ctx := context.Background()
	rackFixtures(t, src)
	b, err := src.ExportRack(ctx, rackA)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := dst.CheckRackImport(ctx, b); err != nil || len(c.Conflicts) != 0 {
		t.Fatalf("empty target: conflicts %v, %v", c.Conflicts, err)
	}
	mustCreate(t, dst, api.KindSubnets, &api.Subnet{Name: "other", CIDR: "10.0.0.0/24"})
	mustCreate(t, dst, api.KindMachines, &api.Machine{Name: "m2", HardwareAddrs: []string{"52:54:00:aa:bb:99"}})
	mustCreate(t, dst, api.KindMachines, &api.Machine{Name: "other", HardwareAddrs: []string{"52:54:00:aa:bb:02"}})
	mustCreate(t, dst, api.KindRacks, &api.Rack{Name: "rack-a"})
	c, err := dst.CheckRackImport(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"subnet 10.0.0.0/24 exists as subnet other", "machine name m2 is used by", "MAC 52:54:00:aa:bb:02 is used by machine other", "rack name rack-a is used by"} {
		if !slices.ContainsFunc(c.Conflicts, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("conflicts %q do not name %q", c.Conflicts, want)
		}
	}
	before := snapshot(t, dst)
	_, err = dst.ImportRack(ctx, alice, b)
	wantErr(t, err, store.ErrConflict, "subnet 10.0.0.0/24")
	if snapshot(t, dst) != before {
		t.Error("a refused import changed the target")
	}
}

func TestImportRackIsIdempotentAndUndone(t *testing.T) {
	src, _ := newStore(t)
	dst, _ := newStore(t)
	ctx := context.Background()
	rackFixtures(t, src)
	b, err := src.ExportRack(ctx, rackA)
	if err != nil {
		t.Fatal(err)
	}
	// The target has the fabric already (same UUID): it is updated, not created, and stays.
	mustCreate(t, dst, api.KindFabrics, &api.Fabric{Uuid: fabric1, Name: "fabric-1"})
	res, err := dst.ImportRack(ctx, alice, b)
	if err != nil {
		t.Fatal(err)
	}
	want := api.RackImport{Fabrics: 1, VLANs: 1, Subnets: 1, Pods: 1, Leases: 1, Created: 4} // rack, vlan, subnet, pod
	if res != want {
		t.Errorf("import %+v, want %+v", res, want)
	}
	var rack api.Rack
	if err := dst.Get(ctx, api.KindRacks, rackA, &rack); err != nil || rack.Status != api.RackPaused || len(rack.RegionEndpoints) != 0 {
		t.Errorf("imported rack %+v (%v): want paused, no endpoints", rack, err)
	}
	var l api.Lease
	if err := dst.Get(ctx, api.KindLeases, "Addr:10.0.0.12", &l); err != nil || l.MAC != "52:54:00:aa:bb:02" {
		t.Errorf("imported lease %+v, %v", l, err)
	}
	// The pod travels with the facts of its last refresh.
	var srcPod, dstPod api.Pod
	if err := src.Get(ctx, api.KindPods, pod1, &srcPod); err != nil {
		t.Fatal(err)
	}
	if err := dst.Get(ctx, api.KindPods, pod1, &dstPod); err != nil || !reflect.DeepEqual(dstPod, srcPod) {
		t.Errorf("imported pod %+v (%v), want %+v", dstPod, err, srcPod)
	}
	once := snapshotOf(t, dst, "racks", "fabrics", "vlans", "subnets", "leases", "pods", "pools")
	if res, err = dst.ImportRack(ctx, alice, b); err != nil || res.Created != 0 {
		t.Fatalf("second import: %+v, %v", res, err)
	}
	if snapshotOf(t, dst, "racks", "fabrics", "vlans", "subnets", "leases", "pods", "pools") != once {
		t.Error("a second import changed the imported objects")
	}

	for range 2 { // undoing twice changes nothing more
		if err := dst.UndoRackImport(ctx, alice, rackA); err != nil {
			t.Fatal(err)
		}
	}
	for _, gone := range []struct{ kind, key string }{{api.KindRacks, rackA}, {api.KindVLANs, vlan1}, {api.KindSubnets, subnet1}, {api.KindPods, pod1}, {api.KindLeases, "Addr:10.0.0.12"}} {
		if err := getAny(ctx, dst, gone.kind, gone.key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s %s after undo: %v", gone.kind, gone.key, err)
		}
	}
	var f api.Fabric
	if err := dst.Get(ctx, api.KindFabrics, fabric1, &f); err != nil {
		t.Errorf("the fabric the target had before the import: %v", err)
	}
}

func TestHandOverRackDeletesWithoutForce(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	rackFixtures(t, s)
	err := s.Delete(ctx, alice, api.KindRacks, rackA, false)
	wantErr(t, err, store.ErrInUse, "primary DHCP, no secondary")
	err = s.HandOverRack(ctx, alice, rackA)
	wantErr(t, err, store.ErrConflict, "not paused")
	if _, err := s.PauseRack(ctx, alice, rackA, api.RackHold{}); err != nil {
		t.Fatal(err)
	}
	if err := s.HandOverRack(ctx, alice, rackA); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []struct{ kind, key string }{{api.KindRacks, rackA}, {api.KindVLANs, vlan1}, {api.KindSubnets, subnet1}, {api.KindFabrics, fabric1}, {api.KindPods, pod1}} {
		if err := getAny(ctx, s, gone.kind, gone.key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s %s after hand-over: %v", gone.kind, gone.key, err)
		}
	}
	var m api.Machine
	if err := s.Get(ctx, api.KindMachines, mach2, &m); err != nil {
		t.Errorf("the rack's machine: %v", err)
	}
	var events []api.Event
	if events, err = s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": api.KindRacks, "Key": rackA}}); err != nil || events[0].Action != "delete" {
		t.Fatalf("events %+v, %v", events, err)
	}
}

func TestRackOperationsQueueAndRelease(t *testing.T) {
	src, _ := newStore(t)
	dst, _ := newStore(t)
	ctx := store.AsMove(context.Background()) // the hand-over is the move's
	rackFixtures(t, src)
	rackFixtures(t, dst)
	op := api.PendingOperation{Target: mach2, Kind: "power-on"}
	err := src.QueueRackOperation(ctx, alice, rackA, &op)
	wantErr(t, err, store.ErrConflict, "not paused")
	if _, err := src.PauseRack(ctx, alice, rackA, api.RackHold{}); err != nil {
		t.Fatal(err)
	}
	other := api.PendingOperation{Target: mach1, Kind: "power-on"}
	err = src.QueueRackOperation(ctx, alice, rackA, &other)
	wantErr(t, err, store.ErrInvalid, "machine m1 is behind rack \"\"")
	for _, target := range []string{mach2, rackA} {
		op := api.PendingOperation{Target: target, Kind: "power-on", Payload: map[string]any{"why": "test"}}
		if err := src.QueueRackOperation(ctx, alice, rackA, &op); err != nil {
			t.Fatal(err)
		}
	}
	queued, err := src.RackOperations(ctx, rackA)
	if err != nil || len(queued) != 2 {
		t.Fatalf("queued %+v, %v", queued, err)
	}
	local := api.PendingOperation{Target: mach2, Kind: "reboot"}
	if _, err := dst.PauseRack(ctx, alice, rackA, api.RackHold{}); err != nil {
		t.Fatal(err)
	}
	if err := dst.QueueRackOperation(ctx, alice, rackA, &local); err != nil {
		t.Fatal(err)
	}
	released, err := dst.ReleaseRackOperations(ctx, alice, rackA, api.OperationsRelease{Origin: "east", Operations: queued})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{}
	for _, op := range released {
		if !op.Released {
			t.Errorf("operation %+v not released", op)
		}
		kinds = append(kinds, op.Kind)
	}
	if !slices.Equal(kinds, []string{"reboot", "power-on", "power-on"}) {
		t.Errorf("released %v", kinds)
	}
	// A retried hand-over stores nothing twice.
	again, err := dst.ReleaseRackOperations(ctx, alice, rackA, api.OperationsRelease{Origin: "east", Operations: queued})
	if err != nil || len(again) != 0 {
		t.Errorf("second release: %+v, %v", again, err)
	}
	if left, err := dst.RackOperations(ctx, rackA); err != nil || len(left) != 0 {
		t.Errorf("unreleased after release: %+v, %v", left, err)
	}
	_, err = dst.ReleaseRackOperations(ctx, alice, rackA, api.OperationsRelease{Operations: queued})
	wantErr(t, err, store.ErrInvalid, "Origin")
}

// getAny gets the object of kind at key, for checks that only look at the error.
func getAny(ctx context.Context, s *store.Store, kind, key string) error {
	switch kind {
	case api.KindRacks:
		return s.Get(ctx, kind, key, new(api.Rack))
	case api.KindVLANs:
		return s.Get(ctx, kind, key, new(api.VLAN))
	case api.KindSubnets:
		return s.Get(ctx, kind, key, new(api.Subnet))
	case api.KindFabrics:
		return s.Get(ctx, kind, key, new(api.Fabric))
	case api.KindPods:
		return s.Get(ctx, kind, key, new(api.Pod))
	default:
		return s.Get(ctx, kind, key, new(api.Lease))
	}
}

// snapshotOf fingerprints the docs of some tables (not seq, which updates keep).
func snapshotOf(t *testing.T, s *store.Store, tables ...string) string {
	t.Helper()
	var out string
	for _, table := range tables {
		var sum string
		if err := s.DB().QueryRow(context.Background(), "SELECT md5(coalesce(string_agg(doc::text, ',' ORDER BY doc::text), '')) FROM "+table).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		out += table + "=" + sum + " "
	}
	return out
}
