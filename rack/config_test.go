package rack

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/ironflow/ironflow/rack/dhcp"
	"github.com/ironflow/ironflow/rack/httpboot"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/region/api"
)

// recordingDHCP keeps the last config it accepted and refuses when told to.
type recordingDHCP struct {
	cfg    dhcp.Config
	refuse error
}

func (r *recordingDHCP) Configure(cfg dhcp.Config) error {
	if r.refuse != nil {
		return r.refuse
	}
	r.cfg = cfg
	return nil
}

const (
	thisRack  = "0d000000-0000-4000-8000-000000000001"
	otherRack = "0d000000-0000-4000-8000-000000000002"
	subnetA   = "5b000000-0000-4000-8000-00000000000a"
	subnetB   = "5b000000-0000-4000-8000-00000000000b" // no dynamic range
	subnetC   = "5b000000-0000-4000-8000-00000000000c" // not served: the rack has no reservation of it
	vlanA     = "7a000000-0000-4000-8000-00000000000a"
)

func sampleConfig() api.RackConfig {
	lease := func(addr, mac, rack, state string) api.Lease {
		return api.Lease{Addr: addr, MAC: mac, Subnet: subnetA, Rack: rack, State: state}
	}
	return api.RackConfig{
		Rack: api.Rack{Uuid: thisRack},
		Subnets: []api.Subnet{
			{Uuid: subnetA, CIDR: "10.1.0.0/24", VLAN: vlanA, Gateway: "10.1.0.1", DynamicRange: api.IPRange{Start: "10.1.0.100", End: "10.1.0.200"}},
			{Uuid: subnetB, CIDR: "10.2.0.0/24", VLAN: vlanA},
		},
		Reservations: []api.Reservation{
			{MAC: "52:54:00:00:00:01", Addr: "10.1.0.10", Hostname: "m1", Machine: "m-1", Subnet: subnetA, BootEnv: "local"},
			{MAC: "52:54:00:00:00:02", Addr: "10.2.0.10", Hostname: "m2", Machine: "m-2", Subnet: subnetB, BootEnv: "ubuntu"},
			{MAC: "52:54:00:00:00:03", Addr: "10.3.0.10", Hostname: "m3", Machine: "m-3", Subnet: subnetC, BootEnv: "ubuntu"},
		},
		Leases: []api.Lease{
			lease("10.1.0.150", "52:54:00:00:01:50", otherRack, "active"),   // honoured
			lease("10.1.0.151", "52:54:00:00:01:51", thisRack, "active"),    // in this rack's own log already
			lease("10.1.0.152", "52:54:00:00:00:01", otherRack, "active"),   // the machine's reservation wins
			lease("10.1.0.10", "52:54:00:00:01:53", otherRack, "active"),    // address reserved for the machine
			lease("10.1.0.154", "52:54:00:00:01:54", otherRack, "released"), // over
		},
	}
}

func TestConfigApplies(t *testing.T) {
	d := &recordingDHCP{}
	a := newApplier(thisRack, d, noLeases{}, dhcp.Config{ServerIP: netip.MustParseAddr("10.1.0.2")}, quiet)
	raw, _ := json.Marshal(sampleConfig())
	if err := a.apply(raw); err != nil {
		t.Fatal(err)
	}
	// The reservation-only subnet is served, on the same link (VLAN) as the other.
	if len(d.cfg.Subnets) != 2 || d.cfg.Subnets[0].ID != subnetA || d.cfg.Subnets[1].ID != subnetB ||
		d.cfg.Subnets[1].RangeStart.IsValid() || d.cfg.Subnets[0].Network != vlanA || d.cfg.Subnets[1].Network != vlanA ||
		d.cfg.ServerIP != netip.MustParseAddr("10.1.0.2") {
		t.Errorf("subnets %+v, server IP %s", d.cfg.Subnets, d.cfg.ServerIP)
	}
	var got []string
	for _, r := range d.cfg.Reservations {
		got = append(got, r.MAC.String()+"="+r.Addr.String())
	}
	if want := []string{"52:54:00:00:00:01=10.1.0.10", "52:54:00:00:00:02=10.2.0.10", "52:54:00:00:01:50=10.1.0.150"}; !slices.Equal(got, want) {
		t.Errorf("reservations %v, want %v", got, want)
	}
	lookups := []struct {
		mac   string
		found bool
		want  httpboot.Boot
	}{
		{"52:54:00:00:00:01", true, httpboot.Boot{BootEnv: "local"}},
		{"52:54:00:00:00:02", true, BootEnvBoot("ubuntu")},
		{"52:54:00:00:00:03", true, BootEnvBoot("ubuntu")}, // boots even where DHCP is not served
		{"52:54:00:00:99:99", false, httpboot.Boot{}},
	}
	for _, l := range lookups {
		mac, _ := net.ParseMAC(l.mac)
		b, found, err := a.BootByMAC(context.Background(), mac)
		if err != nil || found != l.found || b.BootEnv != l.want.BootEnv || b.Kernel != l.want.Kernel {
			t.Errorf("BootByMAC(%s) = %+v, %v, %v; want %+v, %v", l.mac, b, found, err, l.want, l.found)
		}
	}
}

func TestConfigRefusedLeavesTheOldOneInForce(t *testing.T) {
	badMAC := sampleConfig()
	badMAC.Reservations[0].MAC = "nope"
	badAddr := sampleConfig()
	badAddr.Reservations[0].Addr = "10.1.0"
	badRange := sampleConfig()
	badRange.Subnets[0].DynamicRange.End = "x"
	cases := []struct {
		name   string
		raw    []byte
		refuse error
	}{
		{"not JSON", []byte(`{"Subnets":`), nil},
		{"bad reservation MAC", mustJSON(t, badMAC), nil},
		{"bad reservation address", mustJSON(t, badAddr), nil},
		{"bad dynamic range", mustJSON(t, badRange), nil},
		{"DHCP refuses", mustJSON(t, sampleConfig()), errors.New("overlapping subnets")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &recordingDHCP{}
			a := newApplier(thisRack, d, noLeases{}, dhcp.Config{}, quiet)
			d.refuse = c.refuse
			if err := a.apply(c.raw); err == nil {
				t.Fatal("accepted")
			}
			mac, _ := net.ParseMAC("52:54:00:00:00:01")
			if _, found, _ := a.BootByMAC(context.Background(), mac); found || d.cfg.Subnets != nil {
				t.Fatalf("a refused config took effect: boot found %v, DHCP %+v", found, d.cfg)
			}
		})
	}
}

// noLeases is a rack that has granted nothing.
type noLeases struct{}

func (noLeases) Lookup(netip.Addr) (leases.Lease, bool) { return leases.Lease{}, false }
func (noLeases) LookupMAC(string, net.HardwareAddr) (leases.Lease, bool) {
	return leases.Lease{}, false
}

// TestOwnActiveLeasesWinOverReportedOnes: the region reports leases of another rack that
// contradict active leases this rack granted (its address to another MAC, its client on
// another address); the rack keeps its own: its clients renew, the reported MACs get nothing
// of theirs.
func TestOwnActiveLeasesWinOverReportedOnes(t *testing.T) {
	table, err := leases.Open(leases.Options{Dir: t.TempDir(), Rack: thisRack, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	base := dhcp.Config{ServerIP: netip.MustParseAddr("10.1.0.2")}
	handler, err := dhcp.NewHandler(base, table, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	a := newApplier(thisRack, handler, table, base, quiet)
	cfg := sampleConfig()
	cfg.Leases = nil
	if err := a.apply(mustJSON(t, cfg)); err != nil {
		t.Fatal(err)
	}
	client, moved := mustMAC("52:54:00:00:0a:01"), mustMAC("52:54:00:00:0a:02")
	clientAddr, movedAddr := netip.MustParseAddr("10.1.0.120"), netip.MustParseAddr("10.1.0.121")
	for mac, addr := range map[string]netip.Addr{client.String(): clientAddr, moved.String(): movedAddr} {
		if _, err := table.Grant(subnetA, mustMAC(mac), addr, ""); err != nil {
			t.Fatal(err)
		}
	}

	attacker := mustMAC("52:54:00:00:0b:01")
	cfg.Leases = []api.Lease{
		{Addr: clientAddr.String(), MAC: attacker.String(), Subnet: subnetA, Rack: otherRack, State: "active"}, // our address, another MAC
		{Addr: "10.1.0.130", MAC: moved.String(), Subnet: subnetA, Rack: otherRack, State: "active"},           // our client, another address
		{Addr: "10.1.0.131", MAC: "52:54:00:00:0b:02", Subnet: subnetA, Rack: otherRack, State: "active"},      // no conflict: honoured
	}
	if err := a.apply(mustJSON(t, cfg)); err != nil {
		t.Fatal(err)
	}
	if _, err := table.Grant(subnetA, client, clientAddr, ""); err != nil {
		t.Errorf("our client's renewal of %s: %v", clientAddr, err)
	}
	if _, err := table.Grant(subnetA, attacker, clientAddr, ""); err == nil {
		t.Errorf("the reported MAC got our client's address %s", clientAddr)
	}
	if got, err := table.Offer(subnetA, moved, netip.Addr{}); err != nil || got != movedAddr {
		t.Errorf("our client with a lease on %s is offered %s (%v)", movedAddr, got, err)
	}
	if _, err := table.Grant(subnetA, mustMAC("52:54:00:00:0c:01"), netip.MustParseAddr("10.1.0.131"), ""); err == nil {
		t.Error("an address of another rack's lease that conflicts with nothing here was not honoured")
	}
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProxySettingsOfARackConfig: the region's proxy settings with their defaults, and the
// parents of subnets that name their own; a parent that is no http URL refuses the config.
func TestProxySettingsOfARackConfig(t *testing.T) {
	st, size, err := proxySettings(api.RackConfig{})
	if err != nil || !st.Enabled || st.Parent != nil || !slices.Equal(st.ConnectPorts, []int{443}) || size != api.DefaultProxyCacheBytes {
		t.Fatalf("defaults: %+v, %d bytes, %v", st, size, err)
	}
	st, size, err = proxySettings(api.RackConfig{
		Proxy:   api.RackProxy{Disabled: true, Parent: "http://squid:3128", ConnectPorts: []int{443, 8443}, CacheBytes: -1},
		Subnets: []api.Subnet{{Uuid: "s1", CIDR: "10.1.0.0/24", ProxyParent: "http://row-3:3128"}, {Uuid: "s2", CIDR: "10.2.0.0/24"}},
	})
	if err != nil || st.Enabled || st.Parent.String() != "http://squid:3128" || !slices.Equal(st.ConnectPorts, []int{443, 8443}) || size != 0 {
		t.Fatalf("set: %+v, %d bytes, %v", st, size, err)
	}
	if len(st.SubnetParents) != 1 || st.SubnetParents[0].Prefix != netip.MustParsePrefix("10.1.0.0/24") || st.SubnetParents[0].Parent.String() != "http://row-3:3128" {
		t.Errorf("subnet parents: %+v", st.SubnetParents)
	}
	for _, bad := range []api.RackConfig{
		{Proxy: api.RackProxy{Parent: "squid:3128"}},
		{Subnets: []api.Subnet{{Uuid: "s1", CIDR: "10.1.0.0/24", ProxyParent: "https://row-3"}}},
	} {
		if _, _, err := proxySettings(bad); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}
