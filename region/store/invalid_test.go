package store_test

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// TestBadInputChangesNothing: every rejected call names the problem, has the right class and
// leaves every table (including the audit log) exactly as it was.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	fixtures(t, s)
	mustCreate(t, s, api.KindProfiles, &api.Profile{Name: "p2", Profiles: []string{"p1"}})
	mustCreate(t, s, api.KindMachines, &api.Machine{Name: "m3"})
	mustCreate(t, s, api.KindLeases, &api.Lease{Addr: "10.0.0.100", MAC: "52:54:00:00:00:01", Subnet: subnet1, State: "active"})
	ctx := context.Background()
	machine := func(mut func(*api.Machine)) func() error {
		return func() error {
			m := &api.Machine{Name: "m2", Pool: "default"}
			mut(m)
			return s.Create(ctx, alice, api.KindMachines, m)
		}
	}
	subnet := func(mut func(*api.Subnet)) func() error {
		return func() error {
			sn := &api.Subnet{Name: "s2", CIDR: "10.2.0.0/24", VLAN: vlan1}
			mut(sn)
			return s.Create(ctx, alice, api.KindSubnets, sn)
		}
	}
	vlan := func(mut func(*api.VLAN)) func() error {
		return func() error {
			v := &api.VLAN{Fabric: fabric1, VID: 30}
			mut(v)
			return s.Create(ctx, alice, api.KindVLANs, v)
		}
	}
	lease := func(mut func(*api.Lease)) func() error {
		return func() error {
			l := &api.Lease{Addr: "10.0.0.101", MAC: "52:54:00:00:00:02", Subnet: subnet1, State: "active"}
			mut(l)
			return s.Create(ctx, alice, api.KindLeases, l)
		}
	}
	cases := []struct {
		name  string
		call  func() error
		class error
		want  string
	}{
		{"empty machine Name", machine(func(m *api.Machine) { m.Name = "" }), store.ErrInvalid, "machine Name is empty"},
		{"machine Name with spaces", machine(func(m *api.Machine) { m.Name = " m2" }), store.ErrInvalid, "leading or trailing spaces"},
		{"malformed MAC", machine(func(m *api.Machine) { m.HardwareAddrs = []string{"52:54:00:zz:00:01"} }), store.ErrInvalid, `"52:54:00:zz:00:01" is not a MAC address`},
		{"MAC twice", machine(func(m *api.Machine) { m.HardwareAddrs = []string{"52:54:00:00:00:09", "52-54-00-00-00-09"} }), store.ErrInvalid, "lists MAC 52:54:00:00:00:09 twice"},
		{"bad Uuid", machine(func(m *api.Machine) { m.Uuid = "not-a-uuid" }), store.ErrInvalid, `Uuid "not-a-uuid" is not a UUID`},
		{"bad Address", machine(func(m *api.Machine) { m.Address = "10.0.0.300" }), store.ErrInvalid, `Address "10.0.0.300" is not an IP address`},
		{"missing pool", machine(func(m *api.Machine) { m.Pool = "gold" }), store.ErrInvalid, `pool "gold" does not exist`},
		{"missing profile", machine(func(m *api.Machine) { m.Profiles = []string{"p1", "nope"} }), store.ErrInvalid, `profile "nope" does not exist`},
		{"duplicate machine Name", machine(func(m *api.Machine) { m.Name = "m1" }), store.ErrConflict, `machine Name "m1" already exists (uuid ` + mach1 + `)`},
		{"duplicate machine Uuid", machine(func(m *api.Machine) { m.Uuid = mach1 }), store.ErrConflict, `machine Uuid "` + mach1 + `" already exists (name m1)`},
		{"MAC of another machine", machine(func(m *api.Machine) { m.HardwareAddrs = []string{"52:54:00:AA:BB:CC"} }), store.ErrConflict, "MAC 52:54:00:aa:bb:cc belongs to machine m1"},
		{"job of missing machine", func() error {
			return s.Create(ctx, alice, api.KindJobs, &api.Job{Machine: "3a000000-0000-4000-8000-0000000000ff"})
		}, store.ErrInvalid, `machine "3a000000-0000-4000-8000-0000000000ff" does not exist`},
		{"job with unknown State", func() error {
			return s.Create(ctx, alice, api.KindJobs, &api.Job{Machine: mach1, State: "exploded"})
		}, store.ErrInvalid, `job State "exploded" is not one of`},
		{"profile including itself", func() error {
			return s.Create(ctx, alice, api.KindProfiles, &api.Profile{Name: "p3", Profiles: []string{"p3"}})
		}, store.ErrInvalid, "profile p3 would include itself"},
		{"profile cycle", func() error {
			return s.Replace(ctx, alice, api.KindProfiles, "p1", &api.Profile{Name: "p1", Profiles: []string{"p2"}})
		}, store.ErrInvalid, "profile p1 would include itself"},
		{"profile Name with colon", func() error {
			return s.Create(ctx, alice, api.KindProfiles, &api.Profile{Name: "a:b"})
		}, store.ErrInvalid, `reserved for Field:value keys`},
		{"duplicate profile", func() error {
			return s.Create(ctx, alice, api.KindProfiles, &api.Profile{Name: "p1"})
		}, store.ErrConflict, `profile Name "p1" already exists`},
		{"malformed CIDR", subnet(func(sn *api.Subnet) { sn.CIDR = "10.2.0.0/33" }), store.ErrInvalid, `CIDR "10.2.0.0/33" is not an IPv4 network`},
		{"CIDR with host bits", subnet(func(sn *api.Subnet) { sn.CIDR = "10.2.0.7/24" }), store.ErrInvalid, "has host bits set (the network is 10.2.0.0/24)"},
		{"IPv6 CIDR", subnet(func(sn *api.Subnet) { sn.CIDR = "fd00::/64" }), store.ErrInvalid, "is not an IPv4 network"},
		{"gateway outside", subnet(func(sn *api.Subnet) { sn.Gateway = "10.3.0.1" }), store.ErrInvalid, "Gateway 10.3.0.1 is outside 10.2.0.0/24"},
		{"malformed gateway", subnet(func(sn *api.Subnet) { sn.Gateway = "gw" }), store.ErrInvalid, `Gateway "gw" is not an IPv4 address`},
		{"dynamic range outside", subnet(func(sn *api.Subnet) { sn.DynamicRange = api.IPRange{Start: "10.2.0.10", End: "10.2.1.10"} }), store.ErrInvalid, "DynamicRange.End 10.2.1.10 is outside 10.2.0.0/24"},
		{"dynamic range reversed", subnet(func(sn *api.Subnet) { sn.DynamicRange = api.IPRange{Start: "10.2.0.20", End: "10.2.0.10"} }), store.ErrInvalid, "ends before it starts"},
		{"dynamic range half", subnet(func(sn *api.Subnet) { sn.DynamicRange = api.IPRange{Start: "10.2.0.20"} }), store.ErrInvalid, `DynamicRange.End "" is not an IPv4 address`},
		{"dynamic range with broadcast", subnet(func(sn *api.Subnet) { sn.DynamicRange = api.IPRange{Start: "10.2.0.20", End: "10.2.0.255"} }), store.ErrInvalid, "broadcast"},
		{"duplicate CIDR", subnet(func(sn *api.Subnet) { sn.CIDR = "10.0.0.0/24" }), store.ErrConflict, `subnet CIDR "10.0.0.0/24" already exists (uuid ` + subnet1 + `, name s1)`},
		{"subnet on missing VLAN", subnet(func(sn *api.Subnet) { sn.VLAN = vlan2 }), store.ErrInvalid, `vlan "` + vlan2 + `" does not exist`},
		{"vlan on missing fabric", vlan(func(v *api.VLAN) { v.Fabric = "fa000000-0000-4000-8000-0000000000ff" }), store.ErrInvalid, `fabric "fa000000-0000-4000-8000-0000000000ff" does not exist`},
		{"vlan VID out of range", vlan(func(v *api.VLAN) { v.VID = 5000 }), store.ErrInvalid, "VID 5000 is outside 0-4094"},
		{"vlan DHCP without rack", vlan(func(v *api.VLAN) { v.DHCPOn = true }), store.ErrInvalid, "has no PrimaryRack"},
		{"vlan missing rack", vlan(func(v *api.VLAN) { v.PrimaryRack = rackB }), store.ErrInvalid, `rack "` + rackB + `" does not exist`},
		{"duplicate VID", vlan(func(v *api.VLAN) { v.VID = 10 }), store.ErrConflict, "vlan VID 10 already exists on this fabric"},
		{"lease outside subnet", lease(func(l *api.Lease) { l.Addr = "10.9.0.1" }), store.ErrInvalid, "lease Addr 10.9.0.1 is outside 10.0.0.0/24"},
		{"lease bad MAC", lease(func(l *api.Lease) { l.MAC = "nope" }), store.ErrInvalid, `"nope" is not a MAC address`},
		{"lease bad State", lease(func(l *api.Lease) { l.State = "" }), store.ErrInvalid, `State "" is not one of`},
		{"lease missing subnet", lease(func(l *api.Lease) { l.Subnet = "5b000000-0000-4000-8000-0000000000ff" }), store.ErrInvalid, `subnet "5b000000-0000-4000-8000-0000000000ff" does not exist`},
		{"duplicate lease", lease(func(l *api.Lease) { l.Addr = "10.0.0.100" }), store.ErrConflict, "lease Addr 10.0.0.100 already exists in this subnet"},
		{"unknown role", func() error {
			return s.Create(ctx, alice, api.KindUsers, &api.User{Name: "eve", Role: "root"})
		}, store.ErrInvalid, `unknown role "root"`},
		{"rack bad endpoint", func() error {
			return s.Create(ctx, alice, api.KindRacks, &api.Rack{Name: "r", RegionEndpoints: []string{"ftp://x"}})
		}, store.ErrInvalid, `RegionEndpoints "ftp://x" is not an http(s) URL`},
		{"rack unknown status", func() error {
			return s.Create(ctx, alice, api.KindRacks, &api.Rack{Name: "r", Status: "sleepy"})
		}, store.ErrInvalid, `Status "sleepy"`},
		{"pod negative cores", func() error {
			return s.Create(ctx, alice, api.KindPods, &api.Pod{Name: "kvm", Cores: -1})
		}, store.ErrInvalid, "may not be negative"},
		{"pod storage pool twice", func() error {
			sp := api.PodStoragePool{Name: "default", Type: "dir", Path: "/var/lib/libvirt/images"}
			return s.Create(ctx, alice, api.KindPods, &api.Pod{Name: "kvm", StoragePools: []api.PodStoragePool{sp, sp}})
		}, store.ErrInvalid, `pod kvm StoragePools names lists "default" twice`},
		{"pod storage pool without name", func() error {
			return s.Create(ctx, alice, api.KindPods, &api.Pod{Name: "kvm", StoragePools: []api.PodStoragePool{{Type: "dir"}}})
		}, store.ErrInvalid, "StoragePools names contains an empty entry"},
		{"replace changes Uuid", func() error {
			return s.Replace(ctx, alice, api.KindMachines, "Name:m1", &api.Machine{Uuid: "3a000000-0000-4000-8000-000000000002", Name: "m1"})
		}, store.ErrInvalid, "identity cannot change"},
		{"replace renames a pool", func() error {
			return s.Replace(ctx, alice, api.KindPools, "default", &api.Pool{Name: "other"})
		}, store.ErrInvalid, "identity cannot change"},
		{"replace with bad MAC", func() error {
			return s.Replace(ctx, alice, api.KindMachines, mach1, &api.Machine{Name: "m1", HardwareAddrs: []string{"1"}})
		}, store.ErrInvalid, "is not a MAC address"},
		{"replace missing", func() error {
			return s.Replace(ctx, alice, api.KindMachines, "Name:ghost", &api.Machine{Name: "ghost"})
		}, store.ErrNotFound, "machine Name:ghost not found"},
		{"bare key not a UUID", func() error { return s.Get(ctx, api.KindMachines, "m1", &api.Machine{}) }, store.ErrInvalid, `machine key "m1" is neither a UUID nor Field:value`},
		{"unknown key field", func() error { return s.Get(ctx, api.KindMachines, "Colour:red", &api.Machine{}) }, store.ErrInvalid, `machines have no field "Colour"`},
		{"key on object field", func() error { return s.Get(ctx, api.KindMachines, "Meta:x", &api.Machine{}) }, store.ErrInvalid, "not a plain value"},
		{"bare lease key", func() error { return s.Get(ctx, api.KindLeases, "10.0.0.100", &api.Lease{}) }, store.ErrInvalid, "leases are addressed by Field:value keys"},
		{"key with malformed MAC", func() error { return s.Get(ctx, api.KindMachines, "HardwareAddrs:xyz", &api.Machine{}) }, store.ErrInvalid, `"xyz" is not a MAC address`},
		{"pod key with malformed rack", func() error { return s.Get(ctx, api.KindPods, "Rack:xyz", &api.Pod{}) }, store.ErrInvalid, `"xyz" is not a UUID`},
		{"subnet key with malformed CIDR", func() error { return s.Get(ctx, api.KindSubnets, "CIDR:10.0.0.0/99", &api.Subnet{}) }, store.ErrInvalid, `CIDR "10.0.0.0/99" is not an IPv4 network`},
		{"lease key with malformed address", func() error { return s.Get(ctx, api.KindLeases, "Addr:banana", &api.Lease{}) }, store.ErrInvalid, `"banana" is not an IP address`},
		{"ambiguous key", func() error { return s.Get(ctx, api.KindMachines, "Runnable:false", &api.Machine{}) }, store.ErrInvalid, "matches several machines"},
		{"job filter with malformed machine", func() error {
			return s.List(ctx, api.KindJobs, store.ListOptions{Filters: map[string]string{"Machine": "m1"}}, &[]api.Job{})
		}, store.ErrInvalid, `"m1" is not a UUID`},
		{"unknown filter field", func() error {
			return s.List(ctx, api.KindMachines, store.ListOptions{Filters: map[string]string{"Flavour": "x"}}, &[]api.Machine{})
		}, store.ErrInvalid, `machines have no field "Flavour"`},
		{"bad bool filter", func() error {
			return s.List(ctx, api.KindMachines, store.ListOptions{Filters: map[string]string{"Runnable": "maybe"}}, &[]api.Machine{})
		}, store.ErrInvalid, `Runnable is true or false, not "maybe"`},
		{"negative limit", func() error {
			return s.List(ctx, api.KindMachines, store.ListOptions{Limit: -1}, &[]api.Machine{})
		}, store.ErrInvalid, "may not be negative"},
		{"unknown event filter", func() error {
			_, err := s.Events(ctx, store.ListOptions{Filters: map[string]string{"Colour": "x"}})
			return err
		}, store.ErrInvalid, `events cannot be filtered on "Colour"`},
		{"unknown kind", func() error { return s.Get(ctx, "widgets", "x", &api.Machine{}) }, store.ErrNotFound, `"widgets"`},
		{"get missing", func() error { return s.Get(ctx, api.KindPools, "nope", &api.Pool{}) }, store.ErrNotFound, "pool nope not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, s)
			wantErr(t, c.call(), c.class, c.want)
			if after := snapshot(t, s); after != before {
				t.Fatalf("database changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestFailedCreateLeavesObjectAlone: the caller's object is only updated on success.
func TestFailedCreateLeavesObjectAlone(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	m := &api.Machine{Name: "m", Pool: "gold", HardwareAddrs: []string{"52:54:00:AA:00:01"}}
	wantErr(t, s.Create(context.Background(), alice, api.KindMachines, m), store.ErrInvalid, `pool "gold"`)
	if m.Uuid != "" || m.HardwareAddrs[0] != "52:54:00:AA:00:01" || m.Errors != nil {
		t.Fatalf("failed Create modified the object: %+v", m)
	}
	m.Pool = "default"
	mustCreate(t, s, api.KindMachines, m)
	if m.Uuid == "" || m.HardwareAddrs[0] != "52:54:00:aa:00:01" || m.Errors == nil {
		t.Fatalf("Create did not return the stored object: %+v", m)
	}
}
