// Package dhcptest plays a DHCP relay agent in tests: it forwards requests to a DHCP server's
// relay socket from giaddr:67, as a router would, and reads the replies there.
package dhcptest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// Relay is a relay agent bound to giaddr:67 on a loopback address.
type Relay struct {
	conn   *net.UDPConn
	server *net.UDPAddr
	giaddr net.IP
}

// NewRelay binds giaddr:67 and relays to server ("ip:port"); it is closed when t ends.
func NewRelay(t testing.TB, giaddr netip.Addr, server string) *Relay {
	t.Helper()
	conn, err := server4.NewIPv4UDPConn("", &net.UDPAddr{IP: giaddr.AsSlice(), Port: dhcpv4.ServerPort})
	if err != nil {
		t.Fatalf("relay agent on %s:67: %v", giaddr, err)
	}
	t.Cleanup(func() { conn.Close() })
	dst, err := net.ResolveUDPAddr("udp4", server)
	if err != nil {
		t.Fatal(err)
	}
	return &Relay{conn: conn, server: dst, giaddr: giaddr.AsSlice()}
}

// Exchange relays req and returns the reply with its xid. Like a real client it retransmits
// twice (RFC 2131 4.1) when no answer comes within 500 ms: on a loaded test machine a reply can
// miss one window; a NAK or a wrong address is still an answer.
func (r *Relay) Exchange(req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	req.GatewayIPAddr = r.giaddr
	buf := make([]byte, 1500)
	for range 3 {
		if _, err := r.conn.WriteTo(req.ToBytes(), r.server); err != nil {
			return nil, err
		}
		r.conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for {
			n, _, err := r.conn.ReadFrom(buf)
			var timeout net.Error
			if errors.As(err, &timeout) && timeout.Timeout() {
				break
			}
			if err != nil {
				return nil, err
			}
			if resp, err := dhcpv4.FromBytes(buf[:n]); err == nil && resp.TransactionID == req.TransactionID {
				return resp, nil
			}
		}
	}
	return nil, fmt.Errorf("no answer to %s", req.MessageType())
}

// DORA runs DISCOVER, OFFER, REQUEST, ACK for mac and returns the acknowledged address.
// mods change the REQUEST (e.g. dhcpv4.WithOption to send a host name).
func (r *Relay) DORA(mac net.HardwareAddr, mods ...dhcpv4.Modifier) (netip.Addr, error) {
	discover, err := dhcpv4.NewDiscovery(mac)
	if err != nil {
		return netip.Addr{}, err
	}
	offer, err := r.Exchange(discover)
	if err != nil {
		return netip.Addr{}, err
	}
	if offer.MessageType() != dhcpv4.MessageTypeOffer {
		return netip.Addr{}, fmt.Errorf("answer to DISCOVER is %s", offer.MessageType())
	}
	request, err := dhcpv4.NewRequestFromOffer(offer, mods...)
	if err != nil {
		return netip.Addr{}, err
	}
	ack, err := r.Exchange(request)
	if err != nil {
		return netip.Addr{}, err
	}
	if ack.MessageType() != dhcpv4.MessageTypeAck {
		return netip.Addr{}, fmt.Errorf("answer to REQUEST is %s", ack.MessageType())
	}
	got, _ := netip.AddrFromSlice(ack.YourIPAddr.To4())
	return got, nil
}
