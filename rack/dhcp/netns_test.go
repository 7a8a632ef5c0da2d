package dhcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/iana"
	"golang.org/x/sys/unix"
)

// netnsPair creates two network namespaces joined by a veth pair and removes them when
// the test ends, whatever happens. It returns the namespaces and the interface in each.
func netnsPair(t *testing.T) (srvNS, srvIf, cliNS, cliIf string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: the ip command (iproute2) is not installed")
	}
	id := os.Getpid()
	srvNS, cliNS = fmt.Sprintf("ironflow-dhcps-%d", id), fmt.Sprintf("ironflow-dhcpc-%d", id)
	srvIf, cliIf = fmt.Sprintf("ifds%d", id), fmt.Sprintf("ifdc%d", id)
	for _, ns := range []string{srvNS, cliNS} {
		ip(t, "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v: %s", ns, err, out)
			}
		})
	}
	ip(t, "link", "add", srvIf, "netns", srvNS, "type", "veth", "peer", "name", cliIf, "netns", cliNS)
	ip(t, "-n", srvNS, "addr", "add", serverIP.String()+"/24", "dev", srvIf)
	ip(t, "-n", srvNS, "link", "set", srvIf, "up")
	ip(t, "-n", cliNS, "link", "set", cliIf, "up")
	return srvNS, srvIf, cliNS, cliIf
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// inNetns runs fn on an OS thread that has joined namespace ns; sockets fn opens belong to
// ns. The thread stays locked and is discarded afterwards, so no other code runs in ns.
func inNetns(t *testing.T, ns string, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join("/var/run/netns", ns))
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in netns %s: %v", ns, err)
	}
}

// TestBroadcastDORAOverVeth serves an interface in one namespace and runs the
// insomniacslk client on a raw socket in another: DISCOVER and REQUEST are broadcast,
// the renewal is unicast once the client has configured its address.
func TestBroadcastDORAOverVeth(t *testing.T) {
	srvNS, srvIf, cliNS, cliIf := netnsPair(t)
	f := newFixture(t, testConfig())

	var srv *Server
	inNetns(t, srvNS, func() (err error) {
		srv, err = NewServer(f.h, ServerConfig{Interfaces: []string{srvIf}}, quiet)
		return err
	})
	serve(t, srv)

	var conn net.PacketConn
	var mac net.HardwareAddr
	inNetns(t, cliNS, func() error {
		ifi, err := net.InterfaceByName(cliIf)
		if err != nil {
			return err
		}
		mac = ifi.HardwareAddr
		conn, err = nclient4.NewRawUDPConn(cliIf, dhcpv4.ClientPort)
		return err
	})
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
	ip(t, "-n", cliNS, "addr", "add", netip.PrefixFrom(leased, 24).String(), "dev", cliIf)
	var udp net.PacketConn
	inNetns(t, cliNS, func() (err error) {
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
