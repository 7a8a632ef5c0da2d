package dhcp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/ironflow/ironflow/internal/netnstest"
)

// vethLink is a server serving f's handler on an interface with serverIP in one namespace,
// and the client side of the link in another.
type vethLink struct {
	f            *fixture
	cliNS, cliIf string
	mac          net.HardwareAddr // of the client's interface
}

func newVethLink(t *testing.T, cfg Config) *vethLink {
	t.Helper()
	srvNS, srvIf, cliNS, cliIf := netnstest.VethPair(t, "d")
	netnstest.IP(t, "-n", srvNS, "addr", "add", serverIP.String()+"/24", "dev", srvIf)
	v := &vethLink{f: newFixture(t, cfg), cliNS: cliNS, cliIf: cliIf}
	var srv *Server
	netnstest.Run(t, srvNS, func() (err error) {
		srv, err = NewServer(v.f.h, ServerConfig{Interfaces: []string{srvIf}, Logger: quiet})
		return err
	})
	serve(t, srv)
	netnstest.Run(t, cliNS, func() error {
		ifi, err := net.InterfaceByName(cliIf)
		if err != nil {
			return err
		}
		v.mac = ifi.HardwareAddr
		return nil
	})
	return v
}

// client broadcasts on the client's link as mac (any MAC: it is only the packets' chaddr).
func (v *vethLink) client(t *testing.T, mac net.HardwareAddr, opts ...nclient4.ClientOpt) *nclient4.Client {
	t.Helper()
	var conn net.PacketConn
	netnstest.Run(t, v.cliNS, func() (err error) {
		conn, err = nclient4.NewRawUDPConn(v.cliIf, dhcpv4.ClientPort)
		return err
	})
	c, err := nclient4.NewWithConn(conn, mac, append([]nclient4.ClientOpt{nclient4.WithTimeout(2 * time.Second), nclient4.WithRetry(2)}, opts...)...)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestBroadcastDORAOverVeth serves an interface in one namespace and runs the
// insomniacslk client on a raw socket in another: DISCOVER and REQUEST are broadcast,
// the renewal is unicast once the client has configured its address.
func TestBroadcastDORAOverVeth(t *testing.T) {
	v := newVethLink(t, testConfig())
	ctx := context.Background()
	lease, err := v.client(t, v.mac).Request(ctx, dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)))
	if err != nil {
		t.Fatalf("broadcast DORA: %v", err)
	}
	ack := lease.ACK
	leased := addr(ack.YourIPAddr)
	if !testConfig().Subnets[0].CIDR.Contains(leased) || addr(ack.ServerIdentifier()) != serverIP || ack.BootFileName != "ipxe.efi" {
		t.Fatalf("ACK: %s", ack.Summary())
	}
	if l, ok := v.f.table.Lookup(leased); !ok || l.MAC.String() != v.mac.String() {
		t.Fatalf("lease in table: %+v", l)
	}

	// Like a real client, configure the address, then renew by unicast to the server.
	netnstest.IP(t, "-n", v.cliNS, "addr", "add", netip.PrefixFrom(leased, 24).String(), "dev", v.cliIf)
	var udp net.PacketConn
	netnstest.Run(t, v.cliNS, func() (err error) {
		udp, err = net.ListenUDP("udp4", &net.UDPAddr{IP: leased.AsSlice(), Port: dhcpv4.ClientPort})
		return err
	})
	unicast := newClient(t, udp, v.mac, &net.UDPAddr{IP: serverIP.AsSlice(), Port: dhcpv4.ServerPort})
	renewed, err := unicast.Renew(ctx, lease)
	if err != nil {
		t.Fatalf("unicast renew: %v", err)
	}
	if addr(renewed.ACK.YourIPAddr) != leased {
		t.Fatalf("renewal gave %s, want %s", renewed.ACK.YourIPAddr, leased)
	}
}

// TestSharedNetworkAndReservationOnlyOverVeth: the interface's subnet has no dynamic range
// and shares the link with a subnet that has one. Broadcasting clients get their
// reservation, or an address of the other subnet with its router; once the other subnet is
// gone, an unknown client gets no offer at all (counted) and the reserved one still does.
func TestSharedNetworkAndReservationOnlyOverVeth(t *testing.T) {
	cfg := sharedConfig()
	cfg.Subnets[0].RangeStart, cfg.Subnets[0].RangeEnd = netip.Addr{}, netip.Addr{}
	v := newVethLink(t, cfg)
	ctx := context.Background()

	reserved, err := v.client(t, reservedMAC).Request(ctx)
	if err != nil {
		t.Fatalf("reserved client: %v", err)
	}
	if got := addr(reserved.ACK.YourIPAddr); got != reservedA || addr(reserved.ACK.ServerIdentifier()) != serverIP {
		t.Fatalf("reserved client: %s", reserved.ACK.Summary())
	}
	unknown := hw(0x77)
	lease, err := v.client(t, unknown).Request(ctx)
	if err != nil {
		t.Fatalf("unknown client: %v", err)
	}
	if got := addr(lease.ACK.YourIPAddr); !netip.MustParsePrefix("10.0.1.0/24").Contains(got) ||
		len(lease.ACK.Router()) != 1 || lease.ACK.Router()[0].String() != gatewayB {
		t.Fatalf("unknown client on the shared link: %s", lease.ACK.Summary())
	}

	alone := cfg
	alone.Subnets = cfg.Subnets[:1]
	alone.Reservations = cfg.Reservations[:1]
	if err := v.f.h.Configure(alone); err != nil {
		t.Fatal(err)
	}
	stranger := v.client(t, hw(0x78), nclient4.WithTimeout(300*time.Millisecond), nclient4.WithRetry(1))
	if offer, err := stranger.DiscoverOffer(ctx); !errors.Is(err, nclient4.ErrNoResponse) {
		t.Fatalf("unknown client on a reservation-only link: offer %v, err %v; want no response", offer, err)
	}
	if got := v.f.dropped(t, "no_reservation"); got < 1 {
		t.Fatalf("no_reservation drops %v, want the unanswered DISCOVERs", got)
	}
	if _, err := v.client(t, reservedMAC).Request(ctx); err != nil {
		t.Fatalf("reserved client on the reservation-only link: %v", err)
	}
}
