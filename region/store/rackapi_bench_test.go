package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// rackWithMachines registers a rack serving one /16 subnet holding n reserved machines and
// returns the store, the rack and the subnet.
func rackWithMachines(b *testing.B, n int) (*store.Store, string, string) {
	b.Helper()
	s := benchStore(b)
	ctx := context.Background()
	rack, _, err := s.RegisterRack(ctx, api.RackRegistration{Name: "rack-1"}, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	fabric := &api.Fabric{Name: "f"}
	vlan := &api.VLAN{VID: 1, DHCPOn: true, PrimaryRack: rack.Uuid}
	subnet := &api.Subnet{Name: "s", CIDR: "10.8.0.0/16", DynamicRange: api.IPRange{Start: "10.8.128.0", End: "10.8.255.254"}}
	steps := []func() error{
		func() error { return s.Create(ctx, alice, api.KindFabrics, fabric) },
		func() error { vlan.Fabric = fabric.Uuid; return s.Create(ctx, alice, api.KindVLANs, vlan) },
		func() error { subnet.VLAN = vlan.Uuid; return s.Create(ctx, alice, api.KindSubnets, subnet) },
	}
	for i := range n {
		steps = append(steps, func() error {
			return s.Create(ctx, alice, api.KindMachines, &api.Machine{Name: fmt.Sprintf("m%d", i),
				HardwareAddrs: []string{fmt.Sprintf("52:54:00:00:%02x:%02x", byte(i>>8), byte(i))}, Address: fmt.Sprintf("10.8.%d.%d", i/250, 1+i%250)})
		})
	}
	for _, step := range steps {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	return s, rack.Uuid, subnet.Uuid
}

// leaseBatch is n active leases of the dynamic range.
func leaseBatch(subnet string, n int) []api.Lease {
	now := time.Now().UTC()
	batch := make([]api.Lease, n)
	for i := range batch {
		batch[i] = api.Lease{Addr: fmt.Sprintf("10.8.%d.%d", 128+i/250, 1+i%250), MAC: fmt.Sprintf("52:54:01:00:%02x:%02x", byte(i>>8), byte(i)),
			Subnet: subnet, State: "active", Start: now, Expires: now.Add(time.Hour)}
	}
	return batch
}

// BenchmarkRackConfig builds the config of a rack with 1000 reservations and 1000 leases
// of another rack, as the region does when its cached config is out of date.
func BenchmarkRackConfig(b *testing.B) {
	s, rack, subnet := rackWithMachines(b, 1000)
	ctx := context.Background()
	for _, l := range leaseBatch(subnet, 1000) { // leases of no rack: the config carries them
		if err := s.Create(ctx, alice, api.KindLeases, &l); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		cfg, _, err := s.RackConfig(ctx, rack)
		if err != nil || len(cfg.Reservations) != 1000 || len(cfg.Leases) != 1000 {
			b.Fatalf("%d reservations, %d leases, %v", len(cfg.Reservations), len(cfg.Leases), err)
		}
	}
}

// BenchmarkSyncLeases upserts a batch of 500 leases (the rack uploader's batch size).
func BenchmarkSyncLeases(b *testing.B) {
	s, rack, subnet := rackWithMachines(b, 0)
	ctx := context.Background()
	batch := leaseBatch(subnet, 500)
	for b.Loop() {
		if res, err := s.SyncLeases(ctx, alice, rack, batch); err != nil || res.Stored != 500 {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}
