package dhcptest

import (
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/ironflow/ironflow/internal/netnstest"
)

// RawClientConn opens, in network namespace ns, the raw socket a DHCP client without an
// address broadcasts from on interface ifName, and returns it with the interface's MAC.
func RawClientConn(t *testing.T, ns, ifName string) (net.PacketConn, net.HardwareAddr) {
	t.Helper()
	var conn net.PacketConn
	var mac net.HardwareAddr
	netnstest.Run(t, ns, func() error {
		ifi, err := net.InterfaceByName(ifName)
		if err != nil {
			return err
		}
		mac = ifi.HardwareAddr
		conn, err = nclient4.NewRawUDPConn(ifName, dhcpv4.ClientPort)
		return err
	})
	return conn, mac
}
