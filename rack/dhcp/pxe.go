package dhcp

import (
	"net/netip"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// Boot files by client architecture (option 93, RFC 4578 and the IANA registry).
// Firmware loads iPXE, which asks again with user class "iPXE" and gets the HTTP script.
var bootFiles = map[iana.Arch]struct {
	file string
	http bool // UEFI HTTP boot: the file is given as a URL and the reply says "HTTPClient"
}{
	iana.INTEL_X86PC:     {"undionly.kpxe", false},
	iana.EFI_X86_64:      {"ipxe.efi", false}, // 7
	iana.EFI_BC:          {"ipxe.efi", false}, // 9 (x86-64, as sent by most firmware)
	iana.EFI_ARM64:       {"ipxe-arm64.efi", false},
	iana.EFI_X86_64_HTTP: {"ipxe.efi", true},
	iana.EFI_ARM64_HTTP:  {"ipxe-arm64.efi", true},
}

// Paths on the rack's HTTP boot service.
const (
	ipxeScriptPath = "/ipxe/boot.ipxe"
	bootFilesPath  = "/boot/"
)

// iPXE's encapsulated options (option 175) and the one that tells it not to wait for
// ProxyDHCP offers after ours (DHCP_EB_NO_PXEDHCP in iPXE's include/ipxe/dhcp.h). Without it,
// iPXE waits for a ProxyDHCP offer after an offer without "PXEClient" (about 3 s).
const (
	optIPXEEncap  dhcpv4.GenericOptionCode = 175
	ipxeNoPXEDHCP byte                     = 176
)

// bootParams is what a PXE client is told.
type bootParams struct {
	file        string     // option 67 and the header's file field
	nextServer  netip.Addr // siaddr and option 66; zero for HTTP
	vendorClass string     // option 60 in the reply, "" for none
	// noProxyDHCP tells iPXE the rack is its only boot server: no ProxyDHCP offer to wait for.
	noProxyDHCP bool
}

// isIPXE reports whether the request comes from iPXE (option 77 user class "iPXE").
func isIPXE(req *dhcpv4.DHCPv4) bool {
	for _, uc := range req.UserClass() {
		if uc == "iPXE" {
			return true
		}
	}
	return false
}

// bootFor picks the boot parameters for req, or false for a client that is not netbooting
// or whose architecture has no boot file.
func (c *compiled) bootFor(req *dhcpv4.DHCPv4, s *Subnet, serverIP netip.Addr) (bootParams, bool) {
	if isIPXE(req) {
		if c.httpBaseURL == "" {
			return bootParams{}, false
		}
		return bootParams{file: c.httpBaseURL + ipxeScriptPath, noProxyDHCP: true}, true
	}
	archs := req.ClientArch()
	if len(archs) == 0 {
		return bootParams{}, false
	}
	bf, ok := bootFiles[archs[0]]
	if !ok {
		return bootParams{}, false
	}
	if bf.http {
		if c.httpBaseURL == "" {
			return bootParams{}, false
		}
		return bootParams{file: c.httpBaseURL + bootFilesPath + bf.file, vendorClass: "HTTPClient"}, true
	}
	p := bootParams{file: bf.file, nextServer: serverIP}
	switch {
	case s.NextServer.IsValid():
		p.nextServer = s.NextServer
	case c.Boot.TFTPServer.IsValid():
		p.nextServer = c.Boot.TFTPServer
	}
	if strings.HasPrefix(req.ClassIdentifier(), "PXEClient") {
		p.vendorClass = "PXEClient"
	}
	return p, true
}

// apply writes the boot parameters into a reply.
func (p bootParams) apply(resp *dhcpv4.DHCPv4) {
	resp.BootFileName = p.file
	resp.UpdateOption(dhcpv4.OptBootFileName(p.file))
	if p.nextServer.IsValid() {
		resp.ServerIPAddr = p.nextServer.AsSlice()
		resp.UpdateOption(dhcpv4.OptTFTPServerName(p.nextServer.String()))
	}
	if p.vendorClass != "" {
		resp.UpdateOption(dhcpv4.OptClassIdentifier(p.vendorClass))
	}
	if p.noProxyDHCP {
		resp.UpdateOption(dhcpv4.OptGeneric(optIPXEEncap, []byte{ipxeNoPXEDHCP, 1, 1}))
	}
}
