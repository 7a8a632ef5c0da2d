package dhcp

import (
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// FuzzHandle feeds arbitrary packets to the handler (with a real lease table on disk).
// Whatever the input, the handler must not panic, and any reply must be a well-formed
// BOOTREPLY to the same transaction that hands out only addresses of the served subnet.
func FuzzHandle(f *testing.F) {
	seeds := []*dhcpv4.DHCPv4{
		must(dhcpv4.NewDiscovery(hw(1))),
		must(dhcpv4.NewDiscovery(hw(2), relayed, dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64_HTTP)))),
		must(dhcpv4.NewDiscovery(hw(3), dhcpv4.WithUserClass("iPXE", false), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.0.0.150"))))),
		must(dhcpv4.NewDiscovery(reservedMAC, dhcpv4.WithOption(dhcpv4.OptClientArch(iana.INTEL_X86PC)))),
		must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(hw(4)),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(serverIP.AsSlice())), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.0.0.120"))))),
		must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(hw(5)), dhcpv4.WithClientIP(net.ParseIP("10.0.0.130")))),
		must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRelease), dhcpv4.WithHwAddr(hw(5)), dhcpv4.WithClientIP(net.ParseIP("10.0.0.130")))),
		must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeDecline), dhcpv4.WithHwAddr(hw(4)),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.0.0.120"))))),
		must(dhcpv4.NewInform(hw(6), net.ParseIP("10.0.0.9"))),
	}
	for _, s := range seeds {
		f.Add(s.ToBytes())
	}
	f.Add([]byte{})
	f.Add(seeds[0].ToBytes()[:240])

	fix := newFixture(f, testConfig())
	served := testConfig().Subnets[0].CIDR
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := dhcpv4.FromBytes(data)
		if err != nil {
			return // the server drops what does not parse
		}
		resp, err := fix.h.Handle(req, serverIP)
		if resp == nil {
			return
		}
		if err != nil {
			t.Fatalf("both a reply and an error: %v", err)
		}
		if resp.OpCode != dhcpv4.OpcodeBootReply || resp.TransactionID != req.TransactionID {
			t.Fatalf("reply is not a BOOTREPLY to the request: %s", resp.Summary())
		}
		if yi := addr(resp.YourIPAddr); yi.IsValid() && !served.Contains(yi) {
			t.Fatalf("handed out %s outside %s", yi, served)
		}
		if _, err := dhcpv4.FromBytes(resp.ToBytes()); err != nil {
			t.Fatalf("reply does not parse back: %v", err)
		}
	})
}
