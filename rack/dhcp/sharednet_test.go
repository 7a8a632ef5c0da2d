package dhcp

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/region/api"
)

const (
	subnetB  = "5b0e5a52-0000-4000-8000-00000000000b"
	subnetC  = "5b0e5a52-0000-4000-8000-00000000000c"
	vlanID   = "7a0e5a52-0000-4000-8000-000000000001"
	gatewayB = "10.0.1.1"
)

var reservedB = netip.MustParseAddr("10.0.1.50")

// sharedConfig puts a second subnet on testConfig's link (same Network) and a third one,
// with room, on another link. The first subnet's range has two addresses.
func sharedConfig() Config {
	cfg := testConfig()
	cfg.Subnets[0].RangeEnd = netip.MustParseAddr("10.0.0.101")
	cfg.Subnets[0].Network = vlanID
	cfg.Subnets = append(cfg.Subnets,
		Subnet{ID: subnetB, CIDR: netip.MustParsePrefix("10.0.1.0/24"), Gateway: netip.MustParseAddr(gatewayB), Network: vlanID,
			RangeStart: netip.MustParseAddr("10.0.1.100"), RangeEnd: netip.MustParseAddr("10.0.1.101"), LeaseTime: time.Minute},
		Subnet{ID: subnetC, CIDR: netip.MustParsePrefix("10.0.2.0/24"), Network: "another-vlan",
			RangeStart: netip.MustParseAddr("10.0.2.100"), RangeEnd: netip.MustParseAddr("10.0.2.199"), LeaseTime: time.Minute})
	cfg.Reservations = append(cfg.Reservations, Reservation{MAC: hw(0x50), Addr: reservedB, Hostname: "in-b"})
	return cfg
}

// TestSharedNetworkOffersFromTheSubnetWithRoom: a relayed client whose giaddr's subnet is
// full gets an address of the other subnet on its link, with that subnet's mask and router;
// a reservation on the other subnet wins over room on the first; a client that holds an
// address there keeps it; a subnet of another link is never used.
func TestSharedNetworkOffersFromTheSubnetWithRoom(t *testing.T) {
	f := newFixture(t, sharedConfig())
	for i := byte(1); i <= 2; i++ {
		if _, ack := f.dora(t, hw(i), relayed); !netip.MustParsePrefix("10.0.0.0/24").Contains(addr(ack.YourIPAddr)) {
			t.Fatalf("client %d got %s, want the giaddr's subnet while it has room", i, ack.YourIPAddr)
		}
	}
	_, ack := f.dora(t, hw(3), relayed)
	if got := addr(ack.YourIPAddr); got != netip.MustParseAddr("10.0.1.100") ||
		len(ack.Router()) != 1 || ack.Router()[0].String() != gatewayB || ack.IPAddressLeaseTime(0) != time.Minute {
		t.Fatalf("overflow client: %s", ack.Summary())
	}
	if l, ok := f.table.Lookup(addr(ack.YourIPAddr)); !ok || l.Subnet != subnetB {
		t.Fatalf("lease %+v, want one in subnet B", l)
	}
	renew := must(dhcpv4.NewRenewFromAck(ack, dhcpv4.WithBroadcast(true), relayed))
	if r := f.handle(t, renew); r.MessageType() != dhcpv4.MessageTypeAck || addr(r.YourIPAddr) != addr(ack.YourIPAddr) {
		t.Fatalf("rebinding through the first subnet's relay: %s", r.Summary())
	}

	// Room again in the first subnet: the client of B still gets its address in B.
	if r := f.handle(t, must(dhcpv4.NewReleaseFromACK(f.ackOf(t, hw(1))))); r != nil {
		t.Fatalf("RELEASE: %v", r)
	}
	if offer := f.handle(t, must(dhcpv4.NewDiscovery(hw(3), relayed))); addr(offer.YourIPAddr) != addr(ack.YourIPAddr) {
		t.Fatalf("client of B offered %s, want its %s", offer.YourIPAddr, ack.YourIPAddr)
	}
	if _, res := f.dora(t, hw(0x50), relayed); addr(res.YourIPAddr) != reservedB || res.HostName() != "in-b" {
		t.Fatalf("reserved client: %s", res.Summary())
	}

	f.dora(t, hw(4), relayed) // takes the released address of the first subnet
	f.dora(t, hw(5), relayed) // the last of B
	resp, err := f.h.Handle(must(dhcpv4.NewDiscovery(hw(6), relayed)), serverIP)
	if resp != nil || !errors.Is(err, leases.ErrExhausted) {
		t.Fatalf("both subnets of the link full: %v, %v; want no offer (the third subnet is another link)", resp, err)
	}
}

// ackOf returns an ACK-shaped packet of mac's lease, for building its RELEASE.
func (f *fixture) ackOf(t *testing.T, mac net.HardwareAddr) *dhcpv4.DHCPv4 {
	t.Helper()
	for _, s := range []string{subnetID, subnetB} {
		if l, ok := f.table.LookupMAC(s, mac); ok {
			return &dhcpv4.DHCPv4{OpCode: dhcpv4.OpcodeBootReply, ClientHWAddr: mac, YourIPAddr: l.Addr.AsSlice(),
				Options: dhcpv4.OptionsFromList(dhcpv4.OptServerIdentifier(serverIP.AsSlice()))}
		}
	}
	t.Fatalf("%s holds no lease", mac)
	return nil
}

// TestSharedNetworkOnABroadcastLink: a request that arrives on the interface (no giaddr)
// whose address is in a reservation-only subnet gets an address of the link's dynamic subnet.
func TestSharedNetworkOnABroadcastLink(t *testing.T) {
	cfg := sharedConfig()
	cfg.Subnets[0].RangeStart, cfg.Subnets[0].RangeEnd = netip.Addr{}, netip.Addr{}
	f := newFixture(t, cfg)
	if _, ack := f.dora(t, hw(1)); !netip.MustParsePrefix("10.0.1.0/24").Contains(addr(ack.YourIPAddr)) {
		t.Fatalf("unknown client on the interface got %s, want an address of the link's dynamic subnet", ack.YourIPAddr)
	}
	if _, ack := f.dora(t, reservedMAC); addr(ack.YourIPAddr) != reservedA {
		t.Fatalf("reserved client got %s, want %s", ack.YourIPAddr, reservedA)
	}
}

// TestReservationOnlySubnet: a subnet without a dynamic range serves its reservations; an
// unknown client gets no offer (counted, not an error of the server) and a NAK if it asks
// for an address.
func TestReservationOnlySubnet(t *testing.T) {
	cfg := testConfig()
	cfg.Subnets[0].RangeStart, cfg.Subnets[0].RangeEnd = netip.Addr{}, netip.Addr{}
	f := newFixture(t, cfg)
	if _, ack := f.dora(t, reservedMAC, relayed); addr(ack.YourIPAddr) != reservedA || ack.HostName() != "birdy" {
		t.Fatalf("reserved client: %s", ack.Summary())
	}
	for i := range 2 {
		resp, err := f.h.Handle(must(dhcpv4.NewDiscovery(hw(1), relayed)), serverIP)
		if resp != nil || !errors.Is(err, ErrNoReservation) {
			t.Fatalf("unknown client: %v, %v; want no offer and ErrNoReservation", resp, err)
		}
		if got := f.dropped(t, "no_reservation"); got != float64(i+1) {
			t.Fatalf("no_reservation drops %v, want %d", got, i+1)
		}
	}
	if got := f.dropped(t, "error") + f.counter(t, "ironflow_dhcp_pool_exhausted_total"); got != 0 {
		t.Fatalf("an unknown client on a reservation-only subnet counted as an error or exhaustion (%v)", got)
	}
	initReboot := must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(hw(1)),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.0.0.100")))))
	if r := f.handle(t, initReboot); r == nil || r.MessageType() != dhcpv4.MessageTypeNak {
		t.Fatalf("unknown client asking for an address: %v, want a NAK", r)
	}
	if _, ok := f.table.Lookup(netip.MustParseAddr("10.0.0.100")); ok {
		t.Fatal("a lease was granted to an unknown client")
	}
}

func TestSubnetFromAPIWithoutRangeAndWithVLAN(t *testing.T) {
	in := apiSubnet()
	in.DynamicRange, in.VLAN = api.IPRange{}, vlanID
	s, err := SubnetFromAPI(in)
	if err != nil {
		t.Fatal(err)
	}
	if s.dynamic() || s.Network != vlanID {
		t.Fatalf("converted: %+v; want no dynamic range, Network %s", s, vlanID)
	}
	in.DynamicRange.End = "10.0.0.199" // half a range is a mistake, not "no range"
	if _, err := SubnetFromAPI(in); err == nil {
		t.Fatal("a range without a start was accepted")
	}
}
