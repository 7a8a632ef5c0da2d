package rack

import (
	"context"
	"github.com/ironflow/ironflow/internal/testutil"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// vethRack is a rack registered with a region that serves DHCP on an interface of its
// network namespace (address 10.77.0.1/24), joined by a veth pair to a client namespace,
// and a VLAN (DHCP on, the rack primary) for the test's subnets.
type vethRack struct {
	admin               *client.Client
	region              *region
	vlan                api.VLAN
	rackNS, rackIf, dir string
	cliNS, cliIf        string
	mac                 net.HardwareAddr // the client interface's
	serverIP            netip.Addr
	syslogListen        string // the rack's syslog address in its namespace; "" for none
}

func newVethRack(t *testing.T) *vethRack {
	t.Helper()
	v := &vethRack{serverIP: netip.MustParseAddr("10.77.0.1")}
	v.rackNS, v.rackIf, v.cliNS, v.cliIf = netnstest.VethPair(t, "r")
	netnstest.IP(t, "-n", v.rackNS, "addr", "add", v.serverIP.String()+"/24", "dev", v.rackIf)

	r := startRegion(t, pgtest.NewDatabase(t), "region-a")
	v.region = r
	ctx := context.Background()
	v.dir = t.TempDir()
	st, err := Register(ctx, RegisterOptions{URLs: []string{r.URL}, Secret: testSecret, Name: "rack-1", StateDir: v.dir})
	if err != nil {
		t.Fatal(err)
	}
	netnstest.Run(t, v.cliNS, func() error {
		ifi, err := net.InterfaceByName(v.cliIf)
		if err != nil {
			return err
		}
		v.mac = ifi.HardwareAddr
		return nil
	})
	v.admin = r.admin()
	fabric, err := v.admin.Fabrics().Create(ctx, api.Fabric{Name: "fabric-1"})
	if err != nil {
		t.Fatal(err)
	}
	if v.vlan, err = v.admin.VLANs().Create(ctx, api.VLAN{Fabric: fabric.Uuid, VID: 7, DHCPOn: true, PrimaryRack: st.Uuid}); err != nil {
		t.Fatal(err)
	}
	return v
}

// subnet adds a subnet on the VLAN; an empty range serves reservations only.
func (v *vethRack) subnet(t *testing.T, cidr, gateway string, dynamic api.IPRange) {
	t.Helper()
	if _, err := v.admin.Subnets().Create(context.Background(), api.Subnet{Name: "net-" + strings.NewReplacer(".", "-", "/", "-").Replace(cidr), CIDR: cidr, VLAN: v.vlan.Uuid,
		Gateway: gateway, DynamicRange: dynamic}); err != nil {
		t.Fatal(err)
	}
}

// machine adds a machine with mac and a fixed address: the rack reserves it.
func (v *vethRack) machine(t *testing.T, name string, mac net.HardwareAddr, addr string) {
	t.Helper()
	if _, err := v.admin.Machines().Create(context.Background(), api.Machine{Name: name, HardwareAddrs: []string{mac.String()}, Address: addr}); err != nil {
		t.Fatal(err)
	}
}

// start runs `rack serve --dhcp-interface` in the rack's namespace until the test ends;
// opts adjust its options.
func (v *vethRack) start(t *testing.T, opts ...func(*Options)) {
	t.Helper()
	o := rackOptions(t, v.dir)
	o.DHCPInterfaces, o.DHCPRelayListen, o.TFTPListen = []string{v.rackIf}, "", ""
	o.SyslogListen = v.syslogListen
	o.HTTPListen = v.serverIP.String() + ":5248" // in the rack's namespace, as its sockets are
	for _, opt := range opts {
		opt(&o)
	}
	var p *process
	netnstest.Run(t, v.rackNS, func() (err error) { // the interface socket belongs to the rack's namespace
		p, err = open(o)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer p.close()
		done <- p.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("rack: %v", err)
		}
	})
}

// lease waits until a client broadcasting as mac on the client's link gets an ACK that ok
// accepts (the rack fetches its config after it starts).
func (v *vethRack) lease(t *testing.T, mac net.HardwareAddr, what string, ok func(ack *dhcpv4.DHCPv4) bool) {
	t.Helper()
	var conn net.PacketConn
	netnstest.Run(t, v.cliNS, func() (err error) {
		conn, err = nclient4.NewRawUDPConn(v.cliIf, dhcpv4.ClientPort)
		return err
	})
	c, err := nclient4.NewWithConn(conn, mac, nclient4.WithTimeout(time.Second), nclient4.WithRetry(1))
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	defer c.Close()
	testutil.Eventually(t, 10*time.Second, what, func() bool {
		lease, err := c.Request(context.Background())
		return err == nil && ok(lease.ACK)
	})
}

func ackAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip.To4())
	return a
}

// TestBroadcastDHCPOnAnInterface runs `rack serve --dhcp-interface` in a network namespace
// joined by a veth pair to a client's namespace: the client broadcasts and gets the address
// the region reserved for its MAC, with the rack's interface address as server identifier.
func TestBroadcastDHCPOnAnInterface(t *testing.T) {
	v := newVethRack(t)
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	v.machine(t, "veth-machine", v.mac, "10.77.0.50")
	v.start(t)
	v.lease(t, v.mac, "the reserved address by broadcast DHCP", func(ack *dhcpv4.DHCPv4) bool {
		return ackAddr(ack.YourIPAddr) == netip.MustParseAddr("10.77.0.50") && ackAddr(ack.ServerIdentifier()) == v.serverIP
	})
}

// TestSharedNetworkOfAVLANOverVeth: the VLAN has two subnets, the rack interface's one
// without a dynamic range (reservations only) and another with a range. The reserved machine
// gets its address; an unknown client on the same link gets one of the other subnet, with
// that subnet's router and mask.
func TestSharedNetworkOfAVLANOverVeth(t *testing.T) {
	v := newVethRack(t)
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{})
	v.subnet(t, "10.78.0.0/16", "10.78.0.1", api.IPRange{Start: "10.78.0.100", End: "10.78.0.200"})
	v.machine(t, "veth-machine", v.mac, "10.77.0.50")
	v.start(t)
	v.lease(t, v.mac, "the reservation in the reservation-only subnet", func(ack *dhcpv4.DHCPv4) bool {
		return ackAddr(ack.YourIPAddr) == netip.MustParseAddr("10.77.0.50") && ackAddr(ack.ServerIdentifier()) == v.serverIP
	})
	unknown := net.HardwareAddr{0x02, 0, 0, 0x77, 0, 1}
	v.lease(t, unknown, "an address of the VLAN's other subnet", func(ack *dhcpv4.DHCPv4) bool {
		return netip.MustParsePrefix("10.78.0.0/16").Contains(ackAddr(ack.YourIPAddr)) &&
			len(ack.Router()) == 1 && ack.Router()[0].String() == "10.78.0.1" && ack.SubnetMask().String() == "ffff0000"
	})
}
