package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var alice = store.Principal{User: "alice", Role: api.RoleAdmin}

// Fixed UUIDs so fixtures can reference each other.
const (
	rackA   = "aaaaaaaa-0000-4000-8000-000000000001"
	rackB   = "aaaaaaaa-0000-4000-8000-000000000002"
	rackC   = "aaaaaaaa-0000-4000-8000-000000000003"
	fabric1 = "fa000000-0000-4000-8000-000000000001"
	vlan1   = "f1000000-0000-4000-8000-000000000001"
	vlan2   = "f1000000-0000-4000-8000-000000000002"
	subnet1 = "5b000000-0000-4000-8000-000000000001"
	mach1   = "3a000000-0000-4000-8000-000000000001"
)

func newStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	s, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s, url
}

func mustCreate(t *testing.T, s *store.Store, kind string, obj any) {
	t.Helper()
	if err := s.Create(context.Background(), alice, kind, obj); err != nil {
		t.Fatalf("create %s: %v", kind, err)
	}
}

// wantErr checks the class of err and that its message contains want.
func wantErr(t *testing.T, err, class error, want string) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("error %v: want class %v", err, class)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not mention %q", err, want)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// snapshot fingerprints every table, so a test can show that a failed call changed nothing.
func snapshot(t *testing.T, s *store.Store) string {
	t.Helper()
	var out strings.Builder
	for _, table := range []string{"pools", "profiles", "profile_profiles", "machines", "machine_macs", "machine_profiles",
		"jobs", "job_logs", "racks", "fabrics", "vlans", "subnets", "leases", "pods", "users", "tokens", "events", "pending_operations"} {
		var sum string
		if err := s.DB().QueryRow(context.Background(),
			"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM "+table+" t").Scan(&sum); err != nil {
			t.Fatalf("snapshot %s: %v", table, err)
		}
		out.WriteString(table + "=" + sum + " ")
	}
	return out.String()
}

// fixtures creates a rack, a fabric with a VLAN served by the rack, a subnet on it, a profile
// and a machine using both.
func fixtures(t *testing.T, s *store.Store) {
	t.Helper()
	mustCreate(t, s, api.KindRacks, &api.Rack{Uuid: rackA, Name: "rack-a", Status: api.RackOnline})
	mustCreate(t, s, api.KindFabrics, &api.Fabric{Uuid: fabric1, Name: "fabric-1"})
	mustCreate(t, s, api.KindVLANs, &api.VLAN{Uuid: vlan1, Fabric: fabric1, VID: 10, Name: "v10", DHCPOn: true, PrimaryRack: rackA})
	mustCreate(t, s, api.KindSubnets, &api.Subnet{Uuid: subnet1, Name: "s1", CIDR: "10.0.0.0/24", VLAN: vlan1,
		Gateway: "10.0.0.1", DynamicRange: api.IPRange{Start: "10.0.0.100", End: "10.0.0.200"}})
	mustCreate(t, s, api.KindProfiles, &api.Profile{Name: "p1"})
	mustCreate(t, s, api.KindMachines, &api.Machine{Uuid: mach1, Name: "m1", Pool: "default",
		HardwareAddrs: []string{"52:54:00:aa:bb:cc"}, Profiles: []string{"p1"}})
}
