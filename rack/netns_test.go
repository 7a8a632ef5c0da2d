package rack

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/dhcptest"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

// TestBroadcastDHCPOnAnInterface runs `rack serve --dhcp-interface` in a network namespace
// joined by a veth pair to a client's namespace: the client broadcasts and gets the address
// the region reserved for its MAC, with the rack's interface address as server identifier.
func TestBroadcastDHCPOnAnInterface(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the ip command (iproute2) is not installed")
	}
	rackNS, rackIf, cliNS, cliIf := netnstest.VethPair(t, "r")
	serverIP := netip.MustParseAddr("10.77.0.1")
	netnstest.IP(t, "-n", rackNS, "addr", "add", serverIP.String()+"/24", "dev", rackIf)

	r := startRegion(t, pgtest.NewDatabase(t), "region-a")
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Register(ctx, RegisterOptions{URLs: []string{r.URL}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	conn, mac := dhcptest.RawClientConn(t, cliNS, cliIf)
	c := r.admin()
	fabric, err := c.Fabrics().Create(ctx, api.Fabric{Name: "fabric-1"})
	if err != nil {
		t.Fatal(err)
	}
	vlan, err := c.VLANs().Create(ctx, api.VLAN{Fabric: fabric.Uuid, VID: 7, DHCPOn: true, PrimaryRack: st.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subnets().Create(ctx, api.Subnet{Name: "veth", CIDR: "10.77.0.0/24", VLAN: vlan.Uuid,
		DynamicRange: api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Machines().Create(ctx, api.Machine{Name: "veth-machine", HardwareAddrs: []string{mac.String()}, Address: "10.77.0.50"}); err != nil {
		t.Fatal(err)
	}

	o := rackOptions(t, dir)
	o.DHCPInterfaces, o.DHCPRelayListen, o.TFTPListen = []string{rackIf}, "", ""
	var p *process
	netnstest.Run(t, rackNS, func() (err error) { // the interface socket belongs to the rack's namespace
		p, err = open(o)
		return err
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		defer p.close()
		done <- p.run(runCtx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("rack: %v", err)
		}
	})

	client, err := nclient4.NewWithConn(conn, mac, nclient4.WithTimeout(time.Second), nclient4.WithRetry(1))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	testutil.Eventually(t, 10*time.Second, "the reserved address by broadcast DHCP", func() bool {
		lease, err := client.Request(ctx)
		if err != nil {
			return false
		}
		got, _ := netip.AddrFromSlice(lease.ACK.YourIPAddr.To4())
		sid, _ := netip.AddrFromSlice(lease.ACK.ServerIdentifier().To4())
		return got == netip.MustParseAddr("10.77.0.50") && sid == serverIP
	})
}
