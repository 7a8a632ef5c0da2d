package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

// servedSubnet registers a rack and creates a subnet of cidr on a VLAN it serves.
func servedSubnet(t *testing.T, s *store.Store, cidr string) (api.Rack, *api.Subnet) {
	t.Helper()
	ctx := context.Background()
	rack, _, err := s.RegisterRack(ctx, api.RackRegistration{Name: "rack-1"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	fabric := &api.Fabric{Name: "f"}
	mustCreate(t, s, api.KindFabrics, fabric)
	vlan := &api.VLAN{VID: 1, DHCPOn: true, Fabric: fabric.Uuid, PrimaryRack: rack.Uuid}
	mustCreate(t, s, api.KindVLANs, vlan)
	subnet := &api.Subnet{Name: "s", CIDR: cidr, VLAN: vlan.Uuid}
	mustCreate(t, s, api.KindSubnets, subnet)
	return rack, subnet
}

// TestRackConfigRevision: writes that change what a rack serves move the revision once per
// transaction (a change of leases alone leaves the static revision), and writes that change
// nothing a rack serves (heartbeats, a machine's description) leave it.
func TestRackConfigRevision(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	rack, subnet := servedSubnet(t, s, "10.8.0.0/24")
	m := &api.Machine{Name: "m1", HardwareAddrs: []string{"52:54:00:00:00:01"}, Address: "10.8.0.10"}
	mustCreate(t, s, api.KindMachines, m)

	last, err := s.RackConfigRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	steps := []struct {
		name                string
		write               func() error
		revision, staticRev bool // whether each moves
	}{
		{"heartbeat", func() error {
			_, err := s.RackHeartbeat(ctx, rack.Uuid, api.RackHeartbeat{Degraded: true, Reason: "x", CurrentRegion: "http://r"})
			return err
		}, false, false},
		{"machine description", func() error {
			m.Description = "changed"
			return s.Replace(ctx, alice, api.KindMachines, m.Uuid, m)
		}, false, false},
		{"machine address", func() error {
			m.Address = "10.8.0.11"
			return s.Replace(ctx, alice, api.KindMachines, m.Uuid, m)
		}, true, true},
		{"batch of leases", func() error {
			batch := make([]api.Lease, 3)
			for i := range batch {
				batch[i] = api.Lease{Addr: fmt.Sprintf("10.8.0.%d", 100+i), MAC: fmt.Sprintf("52:54:00:00:01:%02x", i),
					Subnet: subnet.Uuid, State: "active", Start: now, Expires: now.Add(time.Hour)}
			}
			_, err := s.SyncLeases(ctx, alice, rack.Uuid, batch)
			return err
		}, true, false},
		{"subnet gateway", func() error {
			subnet.Gateway = "10.8.0.1"
			return s.Replace(ctx, alice, api.KindSubnets, subnet.Uuid, subnet)
		}, true, true},
	}
	for _, st := range steps {
		if err := st.write(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		rev, err := s.RackConfigRevision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := last
		if st.revision {
			want.Revision++
		}
		if st.staticRev {
			want.Static = want.Revision
		}
		if rev != want {
			t.Fatalf("after %s: revision %+v, want %+v (was %+v)", st.name, rev, want, last)
		}
		last = rev
	}

	// The config carries the revision it was read at, and no lease of the rack itself.
	cfg, rev, err := s.RackConfig(ctx, rack.Uuid)
	if err != nil || rev != last || len(cfg.Leases) != 0 || len(cfg.Reservations) != 1 {
		t.Fatalf("RackConfig: %d leases, %d reservations, revision %+v, %v; want no lease, 1 reservation at %+v",
			len(cfg.Leases), len(cfg.Reservations), rev, err, last)
	}
}
