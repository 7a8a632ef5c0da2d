package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

func wantDependents(t *testing.T, err error, want ...string) {
	t.Helper()
	var dep *store.DependencyError
	if !errors.As(err, &dep) || !errors.Is(err, store.ErrInUse) {
		t.Fatalf("error %v: want a *store.DependencyError (store.ErrInUse)", err)
	}
	if !slices.Equal(dep.Dependents, want) {
		t.Fatalf("dependents %q, want %q", dep.Dependents, want)
	}
}

func TestDeleteRefusedWhileInUse(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	fixtures(t, s)
	ctx := context.Background()
	mustCreate(t, s, api.KindProfiles, &api.Profile{Name: "p2", Profiles: []string{"p1"}})
	mustCreate(t, s, api.KindPools, &api.Pool{Name: "gold"})
	mustCreate(t, s, api.KindMachines, &api.Machine{Name: "m2", Pool: "gold"})
	mustCreate(t, s, api.KindPods, &api.Pod{Name: "kvm-01", Pool: "gold"})
	cases := []struct {
		kind, key string
		want      []string
	}{
		{api.KindProfiles, "p1", []string{"machine m1", "profile p2"}},
		{api.KindPools, "gold", []string{"machine m2", "pod kvm-01"}},
		{api.KindFabrics, fabric1, []string{"vlan v10"}},
		{api.KindVLANs, vlan1, []string{"subnet 10.0.0.0/24"}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			before := snapshot(t, s)
			for _, force := range []bool{false, true} { // force only overrides rack dependencies
				wantDependents(t, s.Delete(ctx, alice, c.kind, c.key, force), c.want...)
			}
			if snapshot(t, s) != before {
				t.Fatal("a refused delete changed the database")
			}
		})
	}
	wantErr(t, s.Delete(ctx, alice, api.KindPools, "default", false), store.ErrInUse, "machine m1")
	if err := s.Delete(ctx, alice, api.KindMachines, mach1, false); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.Delete(ctx, alice, api.KindPools, "default", false), store.ErrInvalid, `pool "default" cannot be deleted`)
	if err := s.Delete(ctx, alice, api.KindProfiles, "p2", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, alice, api.KindProfiles, "p1", false); err != nil {
		t.Fatalf("p1 is no longer used: %v", err)
	}
}

func TestDeleteMachineDeletesJobsAndLogs(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	fixtures(t, s)
	ctx := context.Background()
	j := &api.Job{Machine: mach1}
	mustCreate(t, s, api.KindJobs, j)
	if j.State != api.JobCreated || j.Previous != api.NilUUID {
		t.Fatalf("job defaults: %+v", j)
	}
	for _, chunk := range []string{"hello ", "world\n"} {
		if err := s.AppendJobLog(ctx, alice, j.Uuid, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if log, err := s.JobLog(ctx, j.Uuid); err != nil || log != "hello world\n" {
		t.Fatalf("JobLog = %q, %v", log, err)
	}
	if err := s.Delete(ctx, alice, api.KindMachines, "Name:m1", false); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.Get(ctx, api.KindJobs, j.Uuid, &api.Job{}), store.ErrNotFound, "not found")
	_, err := s.JobLog(ctx, j.Uuid)
	wantErr(t, err, store.ErrNotFound, "not found")
	var n int
	if err := s.DB().QueryRow(ctx, "SELECT (SELECT count(*) FROM job_logs) + (SELECT count(*) FROM machine_macs) + (SELECT count(*) FROM machine_profiles)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows of logs, MACs and profile links left (%v)", n, err)
	}
	wantErr(t, s.AppendJobLog(ctx, alice, j.Uuid, "late"), store.ErrNotFound, "not found")
}

// TestDeleteRack covers the rack rules: DHCP moves to a secondary rack without force; a VLAN
// with no secondary or a hosted pod blocks deletion unless forced, and force detaches them.
func TestDeleteRack(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	fixtures(t, s) // rackA is the only (primary) DHCP rack of v10
	ctx := context.Background()
	mustCreate(t, s, api.KindRacks, &api.Rack{Uuid: rackB, Name: "rack-b"})
	mustCreate(t, s, api.KindRacks, &api.Rack{Uuid: rackC, Name: "rack-c"})
	mustCreate(t, s, api.KindVLANs, &api.VLAN{Uuid: vlan2, Fabric: fabric1, VID: 20, Name: "v20", DHCPOn: true, PrimaryRack: rackB, SecondaryRack: rackC})
	v30 := &api.VLAN{Fabric: fabric1, VID: 30, Name: "v30", DHCPOn: true, PrimaryRack: rackC, SecondaryRack: rackA}
	mustCreate(t, s, api.KindVLANs, v30)
	pod := &api.Pod{Name: "kvm-01", Rack: rackA}
	mustCreate(t, s, api.KindPods, pod)

	before := snapshot(t, s)
	wantDependents(t, s.Delete(ctx, alice, api.KindRacks, rackA, false), "vlan v10 (primary DHCP, no secondary)", "pod kvm-01")
	if snapshot(t, s) != before {
		t.Fatal("a refused rack delete changed the database")
	}

	// rack-b: DHCP of v20 moves to its secondary rack-c, no force needed.
	if err := s.Delete(ctx, alice, api.KindRacks, "Name:rack-b", false); err != nil {
		t.Fatal(err)
	}
	wantVLAN(t, s, vlan2, rackC, "", true)

	// rack-a with force: v10 loses its DHCP rack, v30 its secondary, the pod goes.
	if err := s.Delete(ctx, alice, api.KindRacks, rackA, true); err != nil {
		t.Fatal(err)
	}
	wantVLAN(t, s, vlan1, "", "", false)
	wantVLAN(t, s, v30.Uuid, rackC, "", true)
	wantErr(t, s.Get(ctx, api.KindPods, pod.Uuid, &api.Pod{}), store.ErrNotFound, "not found")
	events, err := s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": api.KindPods, "Key": pod.Uuid}})
	if err != nil || len(events) != 2 || events[0].Action != "delete" || events[0].Actor != alice.User {
		t.Fatalf("pod events %+v, %v", events, err)
	}
	events, err = s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": api.KindVLANs, "Key": vlan1}})
	if err != nil || len(events) != 2 || events[0].Action != "update" {
		t.Fatalf("vlan events %+v, %v", events, err)
	}
}

func wantVLAN(t *testing.T, s *store.Store, key, primary, secondary string, dhcp bool) {
	t.Helper()
	var v api.VLAN
	if err := s.Get(context.Background(), api.KindVLANs, key, &v); err != nil {
		t.Fatal(err)
	}
	if v.PrimaryRack != primary || v.SecondaryRack != secondary || v.DHCPOn != dhcp {
		t.Fatalf("vlan %s: primary %q secondary %q DHCPOn %v; want %q %q %v", v.Name, v.PrimaryRack, v.SecondaryRack, v.DHCPOn, primary, secondary, dhcp)
	}
	var n int
	if err := s.DB().QueryRow(context.Background(), "SELECT count(*) FROM vlans WHERE uuid = $1 AND coalesce(primary_rack::text, '') = $2 AND coalesce(secondary_rack::text, '') = $3",
		v.Uuid, primary, secondary).Scan(&n); err != nil || n != 1 {
		t.Fatalf("vlan columns disagree with its document (%v)", err)
	}
}
