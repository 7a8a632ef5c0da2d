package dev

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/ironflow/ironflow/dev/seeddata"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

var seeder = store.Principal{User: "dev-seed", Role: api.RoleAdmin}

// seed loads the seed's objects into the regions once: a restarted dev stack keeps its state
// (a migrated birdy must not come back on region-a).
func (s *Stack) seed(ctx context.Context) error {
	marker := filepath.Join(s.StateDir, "seeded")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	var profiles map[string][]api.Profile
	var machines map[string][]api.Machine
	if err := seeddata.Read("profiles.json", &profiles); err != nil {
		return err
	}
	if err := seeddata.Read("machines.json", &machines); err != nil {
		return err
	}
	birdy, jobs, err := seeddata.Birdy()
	if err != nil {
		return err
	}
	for _, name := range RegionNames {
		st := s.Regions[name].Store
		for i := range profiles[name] {
			if err := st.Create(ctx, seeder, api.KindProfiles, &profiles[name][i]); err != nil {
				return fmt.Errorf("seed %s: %w", name, err)
			}
		}
		if name == "region-a" {
			machines[name] = append([]api.Machine{birdy}, machines[name]...)
		}
		for i := range machines[name] {
			if err := st.Create(ctx, seeder, api.KindMachines, &machines[name][i]); err != nil {
				return fmt.Errorf("seed %s: %w", name, err)
			}
		}
		if name == "region-a" {
			for i := range jobs {
				if err := st.Create(ctx, seeder, api.KindJobs, &jobs[i]); err != nil {
					return fmt.Errorf("seed %s: %w", name, err)
				}
			}
		}
	}
	for i, region := range RegionNames {
		if err := s.seedRackNetwork(ctx, region, i); err != nil {
			return fmt.Errorf("seed %s network: %w", region, err)
		}
	}
	if err := s.seedPools(ctx); err != nil {
		return err
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return fmt.Errorf("seed marker: %w", err)
	}
	return nil
}

// RackMachines is how many machines the seed puts behind rack-a, enough for a rack transfer.
const RackMachines = 24

// seedRackNetwork gives the region's rack a VLAN with DHCP on and a subnet 10.4<n>.0.0/24 and,
// behind rack-a, RackMachines machines with reserved addresses.
func (s *Stack) seedRackNetwork(ctx context.Context, region string, n int) error {
	rk, ok := s.Racks[RackNames[region]]
	if !ok {
		return nil // a stack without racks
	}
	st := s.Regions[region].Store
	base := rackSubnet(n).Addr().As4()
	net := fmt.Sprintf("%d.%d.%d", base[0], base[1], base[2])
	fabric := api.Fabric{Name: "fabric-" + rk.Name}
	if err := st.Create(ctx, seeder, api.KindFabrics, &fabric); err != nil {
		return err
	}
	vlan := api.VLAN{Fabric: fabric.Uuid, VID: 0, Name: "untagged", MTU: 1500, DHCPOn: true, PrimaryRack: rk.Uuid}
	if err := st.Create(ctx, seeder, api.KindVLANs, &vlan); err != nil {
		return err
	}
	subnet := api.Subnet{
		Name: rk.Name + "-pxe", CIDR: net + ".0/24", VLAN: vlan.Uuid, Gateway: net + ".1",
		DNSServers:   []string{net + ".1"},
		DynamicRange: api.IPRange{Start: net + ".100", End: net + ".199"}, LeaseSeconds: 3600,
	}
	if err := st.Create(ctx, seeder, api.KindSubnets, &subnet); err != nil {
		return err
	}
	if region != "region-a" {
		return nil
	}
	// The rack's machines get a pool of their own, so the seed's story (Pool=default) reads as the doc.
	return seedPool(ctx, st, rk.Name, "machines behind "+rk.Name, 0x42, RackMachines, func(i int, m *api.Machine) {
		m.Name = fmt.Sprintf("node-%02d.%s", i, rk.Name)
		m.Address = fmt.Sprintf("%s.%d", net, 10+i)
		m.Rack = rk.Uuid
	})
}

// SeedPools are region-a's pools of machines that are in no rack, one per README example that
// moves machines after the walkthrough, so each still finds its machines on region-a:
// batch for `migrations bulk`, gold for the Temporal CLI start and the nightly schedule.
var SeedPools = map[string]int{"batch": 6, "gold": 4}

// seedPools adds SeedPools to region-a.
func (s *Stack) seedPools(ctx context.Context) error {
	st := s.Regions["region-a"].Store
	for i, name := range slices.Sorted(maps.Keys(SeedPools)) {
		err := seedPool(ctx, st, name, "README example machines", 0x43+i, SeedPools[name], func(i int, m *api.Machine) {
			m.Name = fmt.Sprintf("%s-%02d", name, i)
		})
		if err != nil {
			return fmt.Errorf("seed pool %s: %w", name, err)
		}
	}
	return nil
}

// seedPool creates pool name with n machines, the i-th with MAC 52:54:00:<macByte>:00:<i>,
// named and placed by place.
func seedPool(ctx context.Context, st *store.Store, name, description string, macByte, n int, place func(i int, m *api.Machine)) error {
	pool := api.Pool{Name: name, Description: description}
	if err := st.Create(ctx, seeder, api.KindPools, &pool); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		m := api.Machine{
			Arch: "amd64", BootEnv: "local", Stage: "none",
			Available: true, Runnable: true, Validated: true, Pool: pool.Name, PoolStatus: "Free",
			HardwareAddrs: []string{fmt.Sprintf("52:54:00:%02x:00:%02x", macByte, i)},
			Secret:        fmt.Sprintf("%s-secret-%02d", name, i),
			Meta:          map[string]string{"machine-role": "machine"},
		}
		place(i, &m)
		if err := st.Create(ctx, seeder, api.KindMachines, &m); err != nil {
			return err
		}
	}
	return nil
}
