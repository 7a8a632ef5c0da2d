package dhcp

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/region/api"
	"github.com/prometheus/client_golang/prometheus"
)

const subnetID = "5b0e5a52-0000-4000-8000-000000000001"

var (
	serverIP  = netip.MustParseAddr("10.0.0.2")  // the rack's interface on the subnet
	relayIP   = netip.MustParseAddr("10.0.0.1")  // the gateway acting as relay agent
	tftpIP    = netip.MustParseAddr("10.0.0.3")  // Boot.TFTPServer
	reservedA = netip.MustParseAddr("10.0.0.50") // reserved for reservedMAC
)

var reservedMAC = net.HardwareAddr{0x52, 0x54, 0, 0xaa, 0xbb, 0xcc}

func testConfig() Config {
	return Config{
		ServerIP: serverIP,
		Subnets: []Subnet{{
			ID: subnetID, CIDR: netip.MustParsePrefix("10.0.0.0/24"), Gateway: relayIP,
			DNS:        []netip.Addr{netip.MustParseAddr("10.0.0.53"), netip.MustParseAddr("10.0.0.54")},
			RangeStart: netip.MustParseAddr("10.0.0.100"), RangeEnd: netip.MustParseAddr("10.0.0.199"),
			LeaseTime: 10 * time.Minute,
		}},
		Reservations: []Reservation{{MAC: reservedMAC, Addr: reservedA, Hostname: "birdy", MachineRef: "m-1"}},
		Boot:         Boot{TFTPServer: tftpIP, HTTPBaseURL: "http://10.0.0.2:5248/"},
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type fixture struct {
	h     *Handler
	table *leases.Table
	reg   *prometheus.Registry
}

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	table, err := leases.Open(leases.Options{Dir: t.TempDir(), Rack: "rack-1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { table.Close() })
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(cfg, table, m, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{h: h, table: table, reg: reg}
}

func (f *fixture) counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func (f *fixture) latencyCount(t *testing.T, msgType string) uint64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ironflow_dhcp_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == msgType {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	t.Fatalf("no latency series for %s", msgType)
	return 0
}

func hw(i byte) net.HardwareAddr { return net.HardwareAddr{0x52, 0x54, 0, 0, 0, i} }

// must unwraps packet constructors, which fail only when no random xid can be drawn.
func must(d *dhcpv4.DHCPv4, err error) *dhcpv4.DHCPv4 {
	if err != nil {
		panic(err)
	}
	return d
}

func relayed(d *dhcpv4.DHCPv4) { dhcpv4.WithRelay(relayIP.AsSlice())(d) }

// dora runs discover+request through the handler and returns the ACK.
func (f *fixture) dora(t *testing.T, mac net.HardwareAddr, mods ...dhcpv4.Modifier) (offer, ack *dhcpv4.DHCPv4) {
	t.Helper()
	offer = f.handle(t, must(dhcpv4.NewDiscovery(mac, mods...)))
	if offer == nil || offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("DISCOVER from %s: reply %v", mac, offer)
	}
	ack = f.handle(t, must(dhcpv4.NewRequestFromOffer(offer, mods...)))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("REQUEST from %s: reply %v", mac, ack)
	}
	return offer, ack
}

func (f *fixture) handle(t *testing.T, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	t.Helper()
	resp, err := f.h.Handle(req, serverIP)
	if err != nil {
		t.Fatalf("%s: %v", req.MessageType(), err)
	}
	return resp
}

func TestDORAOptions(t *testing.T) {
	f := newFixture(t, testConfig())
	offer, ack := f.dora(t, hw(1), relayed)
	for _, r := range []*dhcpv4.DHCPv4{offer, ack} {
		yi := addr(r.YourIPAddr)
		if yi.Less(netip.MustParseAddr("10.0.0.100")) || netip.MustParseAddr("10.0.0.199").Less(yi) {
			t.Errorf("%s yiaddr %s outside the dynamic range", r.MessageType(), yi)
		}
		checks := map[string]bool{
			"server id":   addr(r.ServerIdentifier()) == serverIP,
			"mask":        r.SubnetMask().String() == "ffffff00",
			"router":      len(r.Router()) == 1 && addr(r.Router()[0]) == relayIP,
			"dns":         len(r.DNS()) == 2 && addr(r.DNS()[1]) == netip.MustParseAddr("10.0.0.54"),
			"lease time":  r.IPAddressLeaseTime(0) == 10*time.Minute,
			"T1":          r.IPAddressRenewalTime(0) == 5*time.Minute,
			"T2":          r.IPAddressRebindingTime(0) == 525*time.Second,
			"giaddr":      addr(r.GatewayIPAddr) == relayIP,
			"xid":         r.TransactionID != dhcpv4.TransactionID{},
			"no PXE file": r.BootFileName == "",
		}
		for what, ok := range checks {
			if !ok {
				t.Errorf("%s: %s wrong:\n%s", r.MessageType(), what, r.Summary())
			}
		}
	}
	if !addr(offer.YourIPAddr).IsValid() || addr(offer.YourIPAddr) != addr(ack.YourIPAddr) {
		t.Fatalf("ACK %s differs from OFFER %s", ack.YourIPAddr, offer.YourIPAddr)
	}
	if l, ok := f.table.Lookup(addr(ack.YourIPAddr)); !ok || l.State != leases.Active {
		t.Fatalf("lease not in the table: %+v", l)
	}
	if got := f.counter(t, "ironflow_dhcp_leases_granted_total"); got != 1 {
		t.Fatalf("leases granted = %v, want 1", got)
	}
	if got := f.latencyCount(t, "REQUEST"); got != 1 {
		t.Fatalf("REQUEST latency samples = %d, want 1", got)
	}
}

func TestReservationAndBroadcastLink(t *testing.T) {
	f := newFixture(t, testConfig())
	// Not relayed: the subnet is the one of the interface the request arrived on.
	_, ack := f.dora(t, reservedMAC)
	if addr(ack.YourIPAddr) != reservedA || ack.HostName() != "birdy" {
		t.Fatalf("reserved client got %s %q, want %s birdy", ack.YourIPAddr, ack.HostName(), reservedA)
	}
}

func TestRenewRebindReleaseDeclineInform(t *testing.T) {
	f := newFixture(t, testConfig())
	_, ack := f.dora(t, hw(1), relayed)
	leased := addr(ack.YourIPAddr)

	renew := must(dhcpv4.NewRenewFromAck(ack)) // unicast, ciaddr set, no server id
	if r := f.handle(t, renew); r.MessageType() != dhcpv4.MessageTypeAck || addr(r.YourIPAddr) != leased || addr(r.ClientIPAddr) != leased {
		t.Fatalf("renew: %v", r.Summary())
	}
	rebind := must(dhcpv4.NewRenewFromAck(ack, dhcpv4.WithBroadcast(true), relayed))
	if r := f.handle(t, rebind); r.MessageType() != dhcpv4.MessageTypeAck || addr(r.YourIPAddr) != leased {
		t.Fatalf("rebind: %v", r.Summary())
	}

	inform := must(dhcpv4.NewInform(hw(9), net.ParseIP("10.0.0.20")))
	r := f.handle(t, inform)
	if r.MessageType() != dhcpv4.MessageTypeAck || addr(r.YourIPAddr).IsValid() || r.Options.Has(dhcpv4.OptionIPAddressLeaseTime) || len(r.Router()) != 1 {
		t.Fatalf("inform reply must be an ACK with options and no lease: %v", r.Summary())
	}
	if _, ok := f.table.Lookup(netip.MustParseAddr("10.0.0.20")); ok {
		t.Fatal("INFORM created a lease")
	}

	release := must(dhcpv4.NewReleaseFromACK(ack))
	if r := f.handle(t, release); r != nil {
		t.Fatalf("RELEASE got a reply: %v", r)
	}
	if l, _ := f.table.Lookup(leased); l.State != leases.Released {
		t.Fatalf("after RELEASE the lease is %s", l.State)
	}

	_, ack2 := f.dora(t, hw(2), relayed)
	decline := must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeDecline), dhcpv4.WithHwAddr(hw(2)),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ack2.YourIPAddr)), dhcpv4.WithOptionCopied(ack2, dhcpv4.OptionServerIdentifier)))
	if r := f.handle(t, decline); r != nil {
		t.Fatalf("DECLINE got a reply: %v", r)
	}
	if l, _ := f.table.Lookup(addr(ack2.YourIPAddr)); l.State != leases.Declined {
		t.Fatalf("after DECLINE the lease is %s", l.State)
	}
	offer := f.handle(t, must(dhcpv4.NewDiscovery(hw(2), relayed)))
	if addr(offer.YourIPAddr) == addr(ack2.YourIPAddr) {
		t.Fatal("the declined address was offered again")
	}
}

func TestRequestNAKs(t *testing.T) {
	f := newFixture(t, testConfig())
	_, held := f.dora(t, hw(1), relayed)
	heldA := addr(held.YourIPAddr)

	selecting := func(a netip.Addr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
		return must(dhcpv4.NewRequestFromOffer(&dhcpv4.DHCPv4{YourIPAddr: a.AsSlice(), Options: dhcpv4.OptionsFromList(
			dhcpv4.OptServerIdentifier(serverIP.AsSlice()))}, dhcpv4.PrependModifiers(mods, dhcpv4.WithHwAddr(hw(2)))...))
	}
	initReboot := func(a string) *dhcpv4.DHCPv4 {
		return must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(hw(2)),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(a)))))
	}
	renewing := func(a string) *dhcpv4.DHCPv4 {
		return must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(hw(2)),
			dhcpv4.WithClientIP(net.ParseIP(a))))
	}
	cases := []struct {
		name string
		req  *dhcpv4.DHCPv4
	}{
		{"address held by another MAC", selecting(heldA, relayed)},
		{"address reserved for another MAC", initReboot(reservedA.String())},
		{"init-reboot outside the subnet", initReboot("192.168.7.7")},
		{"init-reboot in the subnet but not in the range", initReboot("10.0.0.20")},
		{"renewing an address of no served network", renewing("172.16.0.9")},
		{"renewing someone else's address", renewing(heldA.String())},
		{"selecting without a requested address", func() *dhcpv4.DHCPv4 {
			r := selecting(netip.MustParseAddr("10.0.0.150"))
			r.Options.Del(dhcpv4.OptionRequestedIPAddress)
			return r
		}()},
	}
	for i, tc := range cases {
		r := f.handle(t, tc.req)
		if r == nil || r.MessageType() != dhcpv4.MessageTypeNak {
			t.Errorf("%s: reply %v, want NAK", tc.name, r)
			continue
		}
		if addr(r.YourIPAddr).IsValid() || r.Message() == "" || addr(r.ServerIdentifier()) != serverIP {
			t.Errorf("%s: malformed NAK %s", tc.name, r.Summary())
		}
		if relayedReq := addr(tc.req.GatewayIPAddr).IsValid(); relayedReq != r.IsBroadcast() {
			t.Errorf("%s: NAK broadcast flag %v for a relayed=%v request", tc.name, r.IsBroadcast(), relayedReq)
		}
		if got := f.counter(t, "ironflow_dhcp_naks_total"); got != float64(i+1) {
			t.Errorf("%s: NAK counter %v, want %d", tc.name, got, i+1)
		}
	}
	if l, _ := f.table.Lookup(heldA); l.State != leases.Active || l.MAC.String() != hw(1).String() {
		t.Fatalf("refused requests changed the holder's lease: %+v", l)
	}

	other := selecting(netip.MustParseAddr("10.0.0.150"))
	other.UpdateOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.0.0.99")))
	if r := f.handle(t, other); r != nil {
		t.Fatalf("REQUEST for another server must be ignored, got %v", r.Summary())
	}
}

func TestExhaustionGivesNoOffer(t *testing.T) {
	cfg := testConfig()
	cfg.Subnets[0].RangeEnd = netip.MustParseAddr("10.0.0.101")
	f := newFixture(t, cfg)
	f.dora(t, hw(1), relayed)
	f.dora(t, hw(2), relayed)
	resp, err := f.h.Handle(must(dhcpv4.NewDiscovery(hw(3), relayed)), serverIP)
	if resp != nil || !errors.Is(err, leases.ErrExhausted) {
		t.Fatalf("DISCOVER on a full range: %v, %v; want no reply and ErrExhausted", resp, err)
	}
	if got := f.counter(t, "ironflow_dhcp_pool_exhausted_total"); got != 1 {
		t.Fatalf("exhausted counter = %v", got)
	}
}

func TestPXEBootOptions(t *testing.T) {
	arch := func(a iana.Arch) dhcpv4.Modifier { return dhcpv4.WithOption(dhcpv4.OptClientArch(a)) }
	pxeClass := dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001"))
	cases := []struct {
		name       string
		mods       []dhcpv4.Modifier
		file       string
		nextServer string // "" means none
		class      string
	}{
		{"BIOS", []dhcpv4.Modifier{arch(iana.INTEL_X86PC), pxeClass}, "undionly.kpxe", "10.0.0.3", "PXEClient"},
		{"x86-64 UEFI (7)", []dhcpv4.Modifier{arch(iana.EFI_X86_64)}, "ipxe.efi", "10.0.0.3", ""},
		{"x86-64 UEFI (9)", []dhcpv4.Modifier{arch(iana.EFI_BC), pxeClass}, "ipxe.efi", "10.0.0.3", "PXEClient"},
		{"arm64 UEFI (11)", []dhcpv4.Modifier{arch(iana.EFI_ARM64)}, "ipxe-arm64.efi", "10.0.0.3", ""},
		{"x86-64 UEFI HTTP (16)", []dhcpv4.Modifier{arch(iana.EFI_X86_64_HTTP),
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00016"))},
			"http://10.0.0.2:5248/boot/ipxe.efi", "", "HTTPClient"},
		{"arm64 UEFI HTTP (19)", []dhcpv4.Modifier{arch(iana.EFI_ARM64_HTTP)}, "http://10.0.0.2:5248/boot/ipxe-arm64.efi", "", "HTTPClient"},
		{"iPXE (raw user class)", []dhcpv4.Modifier{arch(iana.EFI_X86_64), dhcpv4.WithUserClass("iPXE", false)},
			"http://10.0.0.2:5248/ipxe/boot.ipxe", "", ""},
		{"iPXE (RFC 3004 user class)", []dhcpv4.Modifier{arch(iana.INTEL_X86PC), dhcpv4.WithUserClass("iPXE", true)},
			"http://10.0.0.2:5248/ipxe/boot.ipxe", "", ""},
		{"no architecture: not netbooting", nil, "", "", ""},
		{"IA32 UEFI has no boot file", []dhcpv4.Modifier{arch(iana.EFI_IA32)}, "", "", ""},
	}
	f := newFixture(t, testConfig())
	for i, tc := range cases {
		offer, ack := f.dora(t, hw(byte(10+i)), append(tc.mods, relayed)...)
		for _, r := range []*dhcpv4.DHCPv4{offer, ack} {
			ns := ""
			if a := addr(r.ServerIPAddr); a.IsValid() {
				ns = a.String()
			}
			if r.BootFileName != tc.file || r.BootFileNameOption() != tc.file || ns != tc.nextServer ||
				r.TFTPServerName() != tc.nextServer || r.ClassIdentifier() != tc.class {
				t.Errorf("%s %s: file %q/%q next-server %q/%q class %q; want %q %q %q", tc.name, r.MessageType(),
					r.BootFileName, r.BootFileNameOption(), ns, r.TFTPServerName(), r.ClassIdentifier(), tc.file, tc.nextServer, tc.class)
			}
		}
	}
}

func TestPXENextServerPrecedence(t *testing.T) {
	bios := dhcpv4.WithOption(dhcpv4.OptClientArch(iana.INTEL_X86PC))
	cases := []struct {
		name             string
		subnetNext, tftp netip.Addr
		want             string
	}{
		{"subnet next-server wins", netip.MustParseAddr("10.0.0.9"), tftpIP, "10.0.0.9"},
		{"boot TFTP server", netip.Addr{}, tftpIP, "10.0.0.3"},
		{"the server itself", netip.Addr{}, netip.Addr{}, serverIP.String()},
	}
	for _, tc := range cases {
		cfg := testConfig()
		cfg.Subnets[0].NextServer, cfg.Boot.TFTPServer = tc.subnetNext, tc.tftp
		f := newFixture(t, cfg)
		offer := f.handle(t, must(dhcpv4.NewDiscovery(hw(1), bios)))
		if got := offer.ServerIPAddr.String(); got != tc.want {
			t.Errorf("%s: next-server %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestBadInputIsRefused(t *testing.T) {
	f := newFixture(t, testConfig())
	reply := must(dhcpv4.NewDiscovery(hw(1), relayed))
	reply.OpCode = dhcpv4.OpcodeBootReply
	noMAC := must(dhcpv4.NewDiscovery(hw(1), relayed))
	noMAC.ClientHWAddr = nil
	unknownType := must(dhcpv4.NewDiscovery(hw(1), relayed, dhcpv4.WithMessageType(dhcpv4.MessageType(99))))
	otherLink := must(dhcpv4.NewDiscovery(hw(1), dhcpv4.WithRelay(net.ParseIP("172.16.0.1"))))
	informNoIP := must(dhcpv4.NewInform(hw(1), net.IPv4zero))
	releaseUnknown := must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRelease), dhcpv4.WithHwAddr(hw(1)),
		dhcpv4.WithClientIP(net.ParseIP("10.0.0.120"))))
	cases := []struct {
		name string
		req  *dhcpv4.DHCPv4
		want error
	}{
		{"BOOTREPLY", reply, ErrNotRequest},
		{"no hardware address", noMAC, ErrMalformed},
		{"unknown message type", unknownType, ErrUnsupported},
		{"relay from an unserved network", otherLink, ErrNoSubnet},
		{"INFORM without ciaddr", informNoIP, ErrMalformed},
		{"RELEASE of a lease it does not hold", releaseUnknown, leases.ErrNoLease},
	}
	for _, tc := range cases {
		resp, err := f.h.Handle(tc.req, serverIP)
		if resp != nil || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, %v; want no reply and %v", tc.name, resp, err, tc.want)
		}
	}
	if got := f.table.Export(); len(got) != 0 {
		t.Fatalf("refused requests created leases: %+v", got)
	}
}

// TestDNSOptions: a rack that serves DNS is option 6 for subnets that name no DNS servers,
// a subnet's own servers win, and option 15 carries the region's domain.
func TestDNSOptions(t *testing.T) {
	cfg := testConfig()
	cfg.ServeDNS, cfg.Domain = true, "a.example"
	f := newFixture(t, cfg)
	_, ack := f.dora(t, hw(1), relayed)
	if len(ack.DNS()) != 2 || addr(ack.DNS()[0]) != netip.MustParseAddr("10.0.0.53") || ack.DomainName() != "a.example" {
		t.Fatalf("subnet with DNS servers: option 6 %v, option 15 %q", ack.DNS(), ack.DomainName())
	}
	cfg.Subnets[0].DNS = nil
	if err := f.h.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	_, ack = f.dora(t, hw(2), relayed)
	if len(ack.DNS()) != 1 || addr(ack.DNS()[0]) != serverIP || ack.DomainName() != "a.example" {
		t.Fatalf("subnet without DNS servers: option 6 %v (want the rack, %s), option 15 %q", ack.DNS(), serverIP, ack.DomainName())
	}
	cfg.ServeDNS, cfg.Domain = false, ""
	if err := f.h.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	_, ack = f.dora(t, hw(3), relayed)
	if ack.Options.Has(dhcpv4.OptionDomainNameServer) || ack.Options.Has(dhcpv4.OptionDomainName) {
		t.Fatalf("a rack without DNS and a region without domain: options 6/15 sent:\n%s", ack.Summary())
	}
}

func TestConfigErrorsKeepThePreviousConfig(t *testing.T) {
	f := newFixture(t, testConfig())
	bad := func(mod func(*Config)) Config { c := testConfig(); mod(&c); return c }
	cases := map[string]Config{
		"gateway outside":      bad(func(c *Config) { c.Subnets[0].Gateway = netip.MustParseAddr("10.9.0.1") }),
		"range outside":        bad(func(c *Config) { c.Subnets[0].RangeEnd = netip.MustParseAddr("10.0.1.9") }),
		"reservation nowhere":  bad(func(c *Config) { c.Reservations[0].Addr = netip.MustParseAddr("192.168.0.1") }),
		"bad HTTP URL":         bad(func(c *Config) { c.Boot.HTTPBaseURL = "ftp://x" }),
		"overlapping subnets":  bad(func(c *Config) { c.Subnets = append(c.Subnets, c.Subnets[0]) }),
		"IPv6 DNS":             bad(func(c *Config) { c.Subnets[0].DNS = []netip.Addr{netip.MustParseAddr("::1")} }),
		"MAC reserved twice":   bad(func(c *Config) { c.Reservations = append(c.Reservations, c.Reservations[0]) }),
		"negative lease time:": bad(func(c *Config) { c.Subnets[0].LeaseTime = -time.Second }),
		"invalid domain":       bad(func(c *Config) { c.Domain = "bad_label.example" }),
	}
	for name, cfg := range cases {
		if err := f.h.Configure(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	f.dora(t, hw(1), relayed) // still serving the original configuration
}

func TestSubnetFromAPI(t *testing.T) {
	good := apiSubnet()
	s, err := SubnetFromAPI(good)
	if err != nil {
		t.Fatal(err)
	}
	if s.CIDR.String() != "10.0.0.0/24" || s.LeaseTime != time.Hour || len(s.DNS) != 1 || len(s.Excluded) != 1 || s.NextServer.IsValid() {
		t.Fatalf("converted: %+v", s)
	}
	for _, field := range []string{"CIDR", "Gateway", "DNSServers", "ReservedIPs", "DynamicRange.Start", "NextServer"} {
		b := apiSubnet()
		switch field {
		case "CIDR":
			b.CIDR = "10.0.0/24"
		case "Gateway":
			b.Gateway = "gw"
		case "DNSServers":
			b.DNSServers = []string{"1.1.1"}
		case "ReservedIPs":
			b.ReservedIPs = []string{"x"}
		case "DynamicRange.Start":
			b.DynamicRange.Start = ""
		case "NextServer":
			b.NextServer = "10.0.0.300"
		}
		if _, err := SubnetFromAPI(b); err == nil {
			t.Errorf("bad %s accepted", field)
		}
	}
}

func apiSubnet() api.Subnet {
	return api.Subnet{Uuid: subnetID, CIDR: "10.0.0.0/24", Gateway: "10.0.0.1", DNSServers: []string{"10.0.0.53"},
		DynamicRange: api.IPRange{Start: "10.0.0.100", End: "10.0.0.199"}, ReservedIPs: []string{"10.0.0.120"}, LeaseSeconds: 3600}
}
