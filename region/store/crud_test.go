package store_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// TestCRUD runs create, get by every kind of key, filtered list, replace and delete for
// every kind, and checks the audit trail.
func TestCRUD(t *testing.T) {
	t.Parallel()
	start := time.Date(2022, 9, 15, 15, 22, 35, 937594733, time.FixedZone("", -4*3600))
	cases := []struct {
		kind    string
		obj     any
		id      func(any) string
		keys    []string // "{id}" stands for the identity
		match   map[string]string
		miss    map[string]string
		mutate  func(any)
		changed []string
	}{
		{
			kind:    api.KindMachines,
			obj:     &api.Machine{Name: "birdy", HardwareAddrs: []string{"52:54:00:AA:BB:01"}, Profiles: []string{"p1"}, Pool: "default"},
			id:      func(o any) string { return o.(*api.Machine).Uuid },
			keys:    []string{"{id}", "Uuid:{id}", "Name:birdy", "HardwareAddrs:52:54:00:aa:bb:01", "HardwareAddrs:52-54-00-AA-BB-01"},
			match:   map[string]string{"Pool": "default", "Runnable": "false", "Profiles": "p1", "HardwareAddrs": "52:54:00:aa:bb:01"},
			miss:    map[string]string{"Runnable": "true"},
			mutate:  func(o any) { m := o.(*api.Machine); m.Runnable, m.Description = true, "racked" },
			changed: []string{"Description", "Runnable"},
		},
		{
			kind:    api.KindJobs,
			obj:     &api.Job{Machine: mach1, State: api.JobRunning, StartTime: start, Task: "hello"},
			id:      func(o any) string { return o.(*api.Job).Uuid },
			keys:    []string{"{id}", "Uuid:{id}", "Task:hello"},
			match:   map[string]string{"Machine": mach1, "State": "running", "CurrentIndex": "0"},
			miss:    map[string]string{"State": "failed"},
			mutate:  func(o any) { o.(*api.Job).State = api.JobFailed },
			changed: []string{"State"},
		},
		{
			kind:    api.KindProfiles,
			obj:     &api.Profile{Name: "p2", Params: map[string]any{"a": true}, Profiles: []string{"p1"}},
			id:      func(o any) string { return o.(*api.Profile).Name },
			keys:    []string{"p2", "Name:p2"},
			match:   map[string]string{"Profiles": "p1"},
			miss:    map[string]string{"Name": "nope"},
			mutate:  func(o any) { o.(*api.Profile).Description = "second" },
			changed: []string{"Description"},
		},
		{
			kind:    api.KindPools,
			obj:     &api.Pool{Name: "gold"},
			id:      func(o any) string { return o.(*api.Pool).Name },
			keys:    []string{"gold", "Name:gold"},
			match:   map[string]string{"Name": "gold"},
			miss:    map[string]string{"Description": "x"},
			mutate:  func(o any) { o.(*api.Pool).Description = "fast" },
			changed: []string{"Description"},
		},
		{
			kind:    api.KindPods,
			obj:     &api.Pod{Name: "kvm-01", Type: "virsh", Rack: rackA, Pool: "default", Cores: 8},
			id:      func(o any) string { return o.(*api.Pod).Uuid },
			keys:    []string{"{id}", "Name:kvm-01"},
			match:   map[string]string{"Rack": rackA, "Cores": "8"},
			miss:    map[string]string{"Cores": "9"},
			mutate:  func(o any) { o.(*api.Pod).Cores = 16 },
			changed: []string{"Cores"},
		},
		{
			kind:    api.KindFabrics,
			obj:     &api.Fabric{Name: "fabric-2"},
			id:      func(o any) string { return o.(*api.Fabric).Uuid },
			keys:    []string{"{id}", "Name:fabric-2"},
			match:   map[string]string{"Name": "fabric-2"},
			miss:    map[string]string{"Name": "nope"},
			mutate:  func(o any) { o.(*api.Fabric).Description = "lab" },
			changed: []string{"Description"},
		},
		{
			kind:    api.KindVLANs,
			obj:     &api.VLAN{Fabric: fabric1, VID: 20, Name: "v20", DHCPOn: true, PrimaryRack: rackA},
			id:      func(o any) string { return o.(*api.VLAN).Uuid },
			keys:    []string{"{id}", "Name:v20", "VID:20"},
			match:   map[string]string{"Fabric": fabric1, "DHCPOn": "true", "VID": "20"},
			miss:    map[string]string{"VID": "30"},
			mutate:  func(o any) { o.(*api.VLAN).MTU = 9000 },
			changed: []string{"MTU"},
		},
		{
			kind: api.KindSubnets,
			obj: &api.Subnet{Name: "s2", CIDR: "10.1.0.0/16", VLAN: vlan1, Gateway: "10.1.0.1",
				DynamicRange: api.IPRange{Start: "10.1.1.1", End: "10.1.1.254"}, DNSServers: []string{"10.1.0.2"}},
			id:      func(o any) string { return o.(*api.Subnet).Uuid },
			keys:    []string{"{id}", "Name:s2", "CIDR:10.1.0.0/16"},
			match:   map[string]string{"VLAN": vlan1, "DNSServers": "10.1.0.2"},
			miss:    map[string]string{"Gateway": "10.9.9.9"},
			mutate:  func(o any) { o.(*api.Subnet).LeaseSeconds = 600 },
			changed: []string{"LeaseSeconds"},
		},
		{
			kind:    api.KindLeases,
			obj:     &api.Lease{Addr: "10.0.0.105", MAC: "52:54:00:00:00:0A", Subnet: subnet1, Rack: rackA, State: "active", Start: start, Expires: start.Add(time.Hour)},
			id:      func(o any) string { return o.(*api.Lease).Addr },
			keys:    []string{"Addr:10.0.0.105", "MAC:52:54:00:00:00:0a"},
			match:   map[string]string{"State": "active", "Subnet": subnet1, "MAC": "52:54:00:00:00:0A"},
			miss:    map[string]string{"State": "expired"},
			mutate:  func(o any) { o.(*api.Lease).State = "released" },
			changed: []string{"State"},
		},
		{
			kind:    api.KindRacks,
			obj:     &api.Rack{Name: "rack-z", Status: api.RackOnline, RegionEndpoints: []string{"http://127.0.0.1:5240"}},
			id:      func(o any) string { return o.(*api.Rack).Uuid },
			keys:    []string{"{id}", "Name:rack-z"},
			match:   map[string]string{"Status": "online", "Name": "rack-z"},
			miss:    map[string]string{"Status": "paused"},
			mutate:  func(o any) { o.(*api.Rack).Status = api.RackPaused },
			changed: []string{"Status"},
		},
		{
			kind:    api.KindUsers,
			obj:     &api.User{Name: "bob", Role: api.RoleOperator},
			id:      func(o any) string { return o.(*api.User).Name },
			keys:    []string{"bob", "Name:bob"},
			match:   map[string]string{"Role": "operator"},
			miss:    map[string]string{"Role": "admin"},
			mutate:  func(o any) { o.(*api.User).Role = api.RoleReadonly },
			changed: []string{"Role"},
		},
	}
	s, _ := newStore(t)
	fixtures(t, s)
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			typ := reflect.TypeOf(c.obj).Elem()
			fresh := func() any { return reflect.New(typ).Interface() }
			mustCreate(t, s, c.kind, c.obj)
			id := c.id(c.obj)
			if id == "" {
				t.Fatal("created object has no identity")
			}
			for _, key := range c.keys {
				key = replaceID(key, id)
				got := fresh()
				if err := s.Get(ctx, c.kind, key, got); err != nil {
					t.Fatalf("Get %s: %v", key, err)
				}
				if jsonOf(t, got) != jsonOf(t, c.obj) {
					t.Fatalf("Get %s = %s, created %s", key, jsonOf(t, got), jsonOf(t, c.obj))
				}
			}
			listed := func(filters map[string]string) []string {
				out := reflect.New(reflect.SliceOf(typ))
				if err := s.List(ctx, c.kind, store.ListOptions{Filters: filters}, out.Interface()); err != nil {
					t.Fatalf("List %v: %v", filters, err)
				}
				var ids []string
				for i := range out.Elem().Len() {
					ids = append(ids, c.id(out.Elem().Index(i).Addr().Interface()))
				}
				return ids
			}
			if ids := listed(c.match); !slices.Equal(ids, []string{id}) {
				t.Fatalf("List %v = %v, want [%s]", c.match, ids, id)
			}
			if ids := listed(c.miss); len(ids) != 0 {
				t.Fatalf("List %v = %v, want none", c.miss, ids)
			}
			if ids := listed(nil); !slices.Contains(ids, id) {
				t.Fatalf("List = %v, missing %s", ids, id)
			}

			c.mutate(c.obj)
			if err := s.Replace(ctx, alice, c.kind, replaceID(c.keys[0], id), c.obj); err != nil {
				t.Fatalf("Replace: %v", err)
			}
			got := fresh()
			if err := s.Get(ctx, c.kind, replaceID(c.keys[0], id), got); err != nil {
				t.Fatal(err)
			}
			if jsonOf(t, got) != jsonOf(t, c.obj) {
				t.Fatalf("after Replace Get = %s, want %s", jsonOf(t, got), jsonOf(t, c.obj))
			}

			if err := s.Delete(ctx, alice, c.kind, replaceID(c.keys[0], id), false); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			wantErr(t, s.Get(ctx, c.kind, replaceID(c.keys[0], id), fresh()), store.ErrNotFound, "not found")

			events, err := s.Events(ctx, store.ListOptions{Filters: map[string]string{"Kind": c.kind, "Key": id}})
			if err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, e := range events {
				actions = append(actions, e.Action)
				if e.Actor != alice.User {
					t.Errorf("event %+v: actor %q, want %q", e, e.Actor, alice.User)
				}
			}
			if !slices.Equal(actions, []string{"delete", "update", "create"}) {
				t.Fatalf("events %v, want delete, update, create", actions)
			}
			if changed := events[1].Details["Changed"]; jsonOf(t, changed) != jsonOf(t, c.changed) {
				t.Fatalf("update event Changed = %v, want %v", changed, c.changed)
			}
		})
	}
}

func replaceID(key, id string) string {
	if key == "{id}" {
		return id
	}
	if k, v, ok := cut(key); ok && v == "{id}" {
		return k + ":" + id
	}
	return key
}

func cut(key string) (string, string, bool) {
	for i := range len(key) {
		if key[i] == ':' {
			return key[:i], key[i+1:], true
		}
	}
	return "", "", false
}

// TestStoreHasEveryKind: every kind of region/api.Kinds has its descriptor and its table
// here, and lists as its own type; the store serves no kind the API does not list.
func TestStoreHasEveryKind(t *testing.T) {
	s, _ := newStore(t)
	for _, k := range api.Kinds {
		list := reflect.New(reflect.SliceOf(k.Type))
		if err := s.List(context.Background(), k.Name, store.ListOptions{}, list.Interface()); err != nil {
			t.Errorf("kind %s (%s): %v", k.Name, k.Type, err)
		}
	}
	names := make([]string, len(api.Kinds))
	for i, k := range api.Kinds {
		names[i] = k.Name
	}
	slices.Sort(names)
	if got := store.KindNames(); !slices.Equal(got, names) {
		t.Errorf("the store has kinds %v, region/api.Kinds %v", got, names)
	}
}
