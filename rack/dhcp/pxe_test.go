package dhcp

import (
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// TestIPXEIsToldNotToWaitForProxyDHCP: offers and ACKs to iPXE carry option 175 with
// sub-option 176 set to 1, so iPXE takes our offer without waiting for ProxyDHCP offers; a
// firmware PXE client, which knows nothing of option 175, gets none.
func TestIPXEIsToldNotToWaitForProxyDHCP(t *testing.T) {
	f := newFixture(t, testConfig())
	bios := dhcpv4.WithOption(dhcpv4.OptClientArch(iana.INTEL_X86PC))
	offer, ack := f.dora(t, hw(1), bios, dhcpv4.WithUserClass("iPXE", false))
	for _, r := range []*dhcpv4.DHCPv4{offer, ack} {
		encap := r.Options.Get(optIPXEEncap)
		sub := dhcpv4.Options{}
		if err := sub.FromBytes(encap); err != nil {
			t.Fatalf("%s: option 175 %x does not parse: %v", r.MessageType(), encap, err)
		}
		if v := sub.Get(dhcpv4.GenericOptionCode(ipxeNoPXEDHCP)); len(v) != 1 || v[0] != 1 {
			t.Errorf("%s: option 175 %x: sub-option 176 = %x, want 01", r.MessageType(), encap, v)
		}
	}
	offer, ack = f.dora(t, hw(2), bios, dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")))
	for _, r := range []*dhcpv4.DHCPv4{offer, ack} {
		if v := r.Options.Get(optIPXEEncap); v != nil {
			t.Errorf("%s to firmware PXE: option 175 %x, want none", r.MessageType(), v)
		}
	}
}
