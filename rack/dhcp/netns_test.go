package dhcp

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/ironflow/ironflow/internal/dhcptest"
	"github.com/ironflow/ironflow/internal/netnstest"
)

// netnsPair is a server and a client host; the server end has serverIP.
func netnsPair(t *testing.T) (srvNS, srvIf, cliNS, cliIf string) {
	t.Helper()
	srvNS, srvIf, cliNS, cliIf = netnstest.VethPair(t, "d")
	netnstest.IP(t, "-n", srvNS, "addr", "add", serverIP.String()+"/24", "dev", srvIf)
	return srvNS, srvIf, cliNS, cliIf
}

// TestBroadcastDORAOverVeth serves an interface in one namespace and runs the
// insomniacslk client on a raw socket in another: DISCOVER and REQUEST are broadcast,
// the renewal is unicast once the client has configured its address.
func TestBroadcastDORAOverVeth(t *testing.T) {
	srvNS, srvIf, cliNS, cliIf := netnsPair(t)
	f := newFixture(t, testConfig())

	var srv *Server
	netnstest.Run(t, srvNS, func() (err error) {
		srv, err = NewServer(f.h, ServerConfig{Interfaces: []string{srvIf}}, quiet)
		return err
	})
	serve(t, srv)

	conn, mac := dhcptest.RawClientConn(t, cliNS, cliIf)
	client := newClient(t, conn, mac, &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ServerPort})

	ctx := context.Background()
	lease, err := client.Request(ctx, dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)))
	if err != nil {
		t.Fatalf("broadcast DORA: %v", err)
	}
	ack := lease.ACK
	leased := addr(ack.YourIPAddr)
	if !testConfig().Subnets[0].CIDR.Contains(leased) || addr(ack.ServerIdentifier()) != serverIP || ack.BootFileName != "ipxe.efi" {
		t.Fatalf("ACK: %s", ack.Summary())
	}
	if l, ok := f.table.Lookup(leased); !ok || l.MAC.String() != mac.String() {
		t.Fatalf("lease in table: %+v", l)
	}

	// Like a real client, configure the address, then renew by unicast to the server.
	netnstest.IP(t, "-n", cliNS, "addr", "add", netip.PrefixFrom(leased, 24).String(), "dev", cliIf)
	var udp net.PacketConn
	netnstest.Run(t, cliNS, func() (err error) {
		udp, err = net.ListenUDP("udp4", &net.UDPAddr{IP: leased.AsSlice(), Port: dhcpv4.ClientPort})
		return err
	})
	unicast := newClient(t, udp, mac, &net.UDPAddr{IP: serverIP.AsSlice(), Port: dhcpv4.ServerPort})
	renewed, err := unicast.Renew(ctx, lease)
	if err != nil {
		t.Fatalf("unicast renew: %v", err)
	}
	if addr(renewed.ACK.YourIPAddr) != leased {
		t.Fatalf("renewal gave %s, want %s", renewed.ACK.YourIPAddr, leased)
	}
}
