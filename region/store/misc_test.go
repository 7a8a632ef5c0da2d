package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

func TestListOrderAndPaging(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	for _, name := range []string{"delta", "alpha", "charlie", "bravo"} {
		mustCreate(t, s, api.KindMachines, &api.Machine{Name: name})
	}
	names := func(opts store.ListOptions) []string {
		var ms []api.Machine
		if err := s.List(ctx, api.KindMachines, opts, &ms); err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	for _, c := range []struct {
		opts store.ListOptions
		want []string
	}{
		{store.ListOptions{}, []string{"alpha", "bravo", "charlie", "delta"}},
		{store.ListOptions{Limit: 2}, []string{"alpha", "bravo"}},
		{store.ListOptions{Offset: 1, Limit: 2}, []string{"bravo", "charlie"}},
		{store.ListOptions{Offset: 3}, []string{"delta"}},
		{store.ListOptions{Offset: 9}, []string{}},
		{store.ListOptions{Filters: map[string]string{"Name": "charlie"}}, []string{"charlie"}},
	} {
		if got := names(c.opts); !slices.Equal(got, c.want) {
			t.Errorf("List %+v = %v, want %v", c.opts, got, c.want)
		}
	}

	// Jobs: by StartTime, then Uuid; leases (no Name): by creation.
	var m api.Machine
	if err := s.Get(ctx, api.KindMachines, "Name:alpha", &m); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, offset := range []time.Duration{3, 1, 2} {
		mustCreate(t, s, api.KindJobs, &api.Job{Machine: m.Uuid, StartTime: t0.Add(offset * time.Second), CurrentIndex: i})
	}
	var jobs []api.Job
	if err := s.List(ctx, api.KindJobs, store.ListOptions{}, &jobs); err != nil {
		t.Fatal(err)
	}
	var order []int
	for _, j := range jobs {
		order = append(order, j.CurrentIndex)
	}
	if !slices.Equal(order, []int{1, 2, 0}) {
		t.Fatalf("jobs in order %v, want by StartTime [1 2 0]", order)
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	bob := store.Principal{User: "bob", Role: api.RoleOperator}
	mustCreate(t, s, api.KindPools, &api.Pool{Name: "gold"})
	if err := s.Create(ctx, bob, api.KindPools, &api.Pool{Name: "silver"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, bob, api.KindPools, "gold", false); err != nil {
		t.Fatal(err)
	}
	all, err := s.Events(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range all {
		got = append(got, e.Actor+" "+e.Action+" "+e.Kind+" "+e.Key)
		if e.Time.IsZero() || e.ID == 0 {
			t.Errorf("event without time or ID: %+v", e)
		}
	}
	want := []string{"bob delete pools gold", "bob create pools silver", "alice create pools gold"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want newest first %q", got, want)
	}
	for _, c := range []struct {
		filters map[string]string
		limit   int
		want    int
	}{
		{map[string]string{"Actor": "bob"}, 0, 2},
		{map[string]string{"Key": "gold"}, 0, 2},
		{map[string]string{"Kind": "pools", "Actor": "alice"}, 0, 1},
		{map[string]string{"Kind": "machines"}, 0, 0},
		{nil, 1, 1},
	} {
		evs, err := s.Events(ctx, store.ListOptions{Filters: c.filters, Limit: c.limit})
		if err != nil || len(evs) != c.want {
			t.Errorf("Events %v limit %d: %d events (%v), want %d", c.filters, c.limit, len(evs), err, c.want)
		}
	}
}

func TestPendingOperations(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	op := &api.PendingOperation{Target: "AAAAAAAA-0000-4000-8000-000000000001", Kind: "power-on", Payload: map[string]any{"why": "test"}}
	if err := s.QueueOperation(ctx, alice, op); err != nil {
		t.Fatal(err)
	}
	if op.ID == 0 || op.Created.IsZero() || op.Target != rackA {
		t.Fatalf("queued %+v: want ID, Created and a canonical Target", op)
	}
	if err := s.QueueOperation(ctx, alice, &api.PendingOperation{Target: rackB, Kind: "release"}); err != nil {
		t.Fatal(err)
	}
	ops, err := s.PendingOperations(ctx, rackA)
	if err != nil || len(ops) != 1 || ops[0].Kind != "power-on" || ops[0].Payload["why"] != "test" {
		t.Fatalf("PendingOperations(rackA) = %+v, %v", ops, err)
	}
	if all, err := s.PendingOperations(ctx, ""); err != nil || len(all) != 2 {
		t.Fatalf("PendingOperations() = %+v, %v", all, err)
	}
	before := snapshot(t, s)
	wantErr(t, s.QueueOperation(ctx, alice, &api.PendingOperation{Target: "rack-a", Kind: "x"}), store.ErrInvalid, `Target "rack-a" is not a UUID`)
	wantErr(t, s.QueueOperation(ctx, alice, &api.PendingOperation{Target: rackA}), store.ErrInvalid, "has no Kind")
	if snapshot(t, s) != before {
		t.Fatal("a refused QueueOperation changed the database")
	}
	if evs, err := s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": "operations", "Key": rackA}}); err != nil || len(evs) != 1 {
		t.Fatalf("queue events %+v, %v", evs, err)
	}
}

func TestRegionIdentityAndEndpoints(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	id, err := s.Identity(ctx, "region-1")
	if err != nil || len(id) != 36 {
		t.Fatalf("Identity = %q, %v", id, err)
	}
	again, err := s.Identity(ctx, "region-one")
	if err != nil || again != id {
		t.Fatalf("Identity changed from %s to %s (%v)", id, again, err)
	}
	var name string
	if err := s.DB().QueryRow(ctx, "SELECT name FROM region_identity").Scan(&name); err != nil || name != "region-one" {
		t.Fatalf("stored name %q (%v)", name, err)
	}
	_, err = s.Identity(ctx, "")
	wantErr(t, err, store.ErrInvalid, "region Name is empty")

	for _, u := range []string{"http://10.0.0.2:5240", "http://10.0.0.1:5240", "http://10.0.0.3:5240"} {
		if err := s.Heartbeat(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().Exec(ctx, "UPDATE region_processes SET last_seen = now() - interval '1 hour' WHERE url = 'http://10.0.0.3:5240'"); err != nil {
		t.Fatal(err)
	}
	urls, err := s.Endpoints(ctx, time.Minute)
	if err != nil || !slices.Equal(urls, []string{"http://10.0.0.1:5240", "http://10.0.0.2:5240"}) {
		t.Fatalf("Endpoints = %v, %v", urls, err)
	}
	if err := s.Heartbeat(ctx, "http://10.0.0.3:5240"); err != nil {
		t.Fatal(err)
	}
	if urls, _ := s.Endpoints(ctx, time.Minute); len(urls) != 3 {
		t.Fatalf("after a new heartbeat Endpoints = %v", urls)
	}
	wantErr(t, s.Heartbeat(ctx, "not a url"), store.ErrInvalid, "is not an http(s) URL")
	_, err = s.Endpoints(ctx, 0)
	wantErr(t, err, store.ErrInvalid, "must be positive")
}

// TestRename: uuid-keyed kinds may be renamed by Replace; a clashing name is a conflict.
func TestRename(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	fixtures(t, s)
	mustCreate(t, s, api.KindMachines, &api.Machine{Name: "m2"})
	var m api.Machine
	if err := s.Get(ctx, api.KindMachines, "HardwareAddrs:52:54:00:aa:bb:cc", &m); err != nil {
		t.Fatal(err)
	}
	m.Name, m.Uuid = "m1-renamed", ""
	if err := s.Replace(ctx, alice, api.KindMachines, "Name:m1", &m); err != nil {
		t.Fatal(err)
	}
	if m.Uuid != mach1 {
		t.Fatalf("Replace with an empty Uuid gave %q, want the stored %s", m.Uuid, mach1)
	}
	if err := s.Get(ctx, api.KindMachines, "Name:m1-renamed", &api.Machine{}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.Get(ctx, api.KindMachines, "Name:m1", &api.Machine{}), store.ErrNotFound, "machine Name:m1 not found")
	before := snapshot(t, s)
	m.Name = "m2"
	wantErr(t, s.Replace(ctx, alice, api.KindMachines, mach1, &m), store.ErrConflict, `machine Name "m2" already exists (uuid `)
	if snapshot(t, s) != before {
		t.Fatal("a refused rename changed the database")
	}
}

// TestConcurrentCreatesOfOneMAC: the unique MAC holds in SQL, not only in Go.
func TestConcurrentCreatesOfOneMAC(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	results := make(chan error, 6)
	for i := range 6 {
		go func() {
			results <- s.Create(ctx, alice, api.KindMachines, &api.Machine{Name: "racer-" + string(rune('a'+i)), HardwareAddrs: []string{"52:54:00:12:34:56"}})
		}()
	}
	won := 0
	for range 6 {
		err := <-results
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("losing create: %v, want ErrConflict", err)
		}
	}
	var ms []api.Machine
	if err := s.List(ctx, api.KindMachines, store.ListOptions{}, &ms); err != nil || won != 1 || len(ms) != 1 {
		t.Fatalf("%d creates won, %d machines stored (%v); want 1", won, len(ms), err)
	}
}
