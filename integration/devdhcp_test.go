package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/internal/netns"
	"github.com/ironflow/ironflow/internal/testutil"
)

// TestDevStackRackServesDHCPOnItsLink: with RackLinks, a DHCP client on the machines' end of
// rack-a's link gets an offer from rack-a out of its seeded dynamic range, and once the stack
// stops neither namespace (nor the veth pair with them) is left.
func TestDevStackRackServesDHCPOnItsLink(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts PostgreSQL and the Temporal dev server")
	}
	if os.Geteuid() != 0 {
		t.Skip("rack links need root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := dev.StartStack(ctx, dev.StackOptions{Seed: true, RackLinks: true, TemporalUIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			s.Stop()
		}
	}()
	rk := s.Racks["rack-a"]
	if rk.Link == nil {
		t.Fatalf("rack-a has no link: %s", rk.DHCPOff)
	}
	link := *rk.Link
	if err := s.WaitRackOnline(ctx, rk.Name); err != nil {
		t.Fatal(err)
	}

	offerFromRackA(t, link.MachinesNetns, link.MachinesInterface, link.Address.Addr())

	s.Stop()
	stopped = true
	for _, ns := range []string{link.Netns, link.MachinesNetns} {
		if _, err := os.Stat(filepath.Join(netns.Dir, ns)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s left after the stack stopped: %v", ns, err)
		}
	}
	for _, ifname := range []string{link.Interface, link.MachinesInterface} {
		if _, err := net.InterfaceByName(ifname); err == nil {
			t.Errorf("interface %s left in the host's namespace", ifname)
		}
	}
}

// offerFromRackA broadcasts a DHCPDISCOVER on interface ifname of namespace ns until rack-a,
// at server, offers an address of its seeded dynamic range 10.42.0.100-199.
func offerFromRackA(t *testing.T, ns, ifname string, server netip.Addr) {
	t.Helper()
	var conn net.PacketConn
	if err := netns.Run(ns, func() (err error) {
		conn, err = nclient4.NewRawUDPConn(ifname, dhcpv4.ClientPort)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x02, 0xde, 0x00, 0x00, 0x00, 0x02}
	c, err := nclient4.NewWithConn(conn, mac, nclient4.WithTimeout(time.Second), nclient4.WithRetry(1))
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	defer c.Close()
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		offer, err := c.DiscoverOffer(context.Background())
		if err != nil {
			return "no offer on rack-a's link: " + err.Error()
		}
		yours, _ := netip.AddrFromSlice(offer.YourIPAddr.To4())
		from, _ := netip.AddrFromSlice(offer.ServerIdentifier().To4())
		if from != server || !netip.MustParsePrefix("10.42.0.0/24").Contains(yours) || yours.As4()[3] < 100 || yours.As4()[3] > 199 {
			return fmt.Sprintf("offer of %s from %s; want one of 10.42.0.100-199 from %s", yours, from, server)
		}
		return ""
	})
}
