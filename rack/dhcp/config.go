// Package dhcp is the rack's DHCPv4 server: a pure request handler (Handler.Handle) that
// decides replies from the configuration and the lease table, and a Server that feeds it
// from broadcast sockets on interfaces and from a unicast socket for relayed requests.
package dhcp

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
)

// Config is what the server hands out. The rack builds it from its cached region config.
type Config struct {
	// ServerIP identifies the server to clients whose request arrived on the relay socket
	// (option 54); requests on an interface use that interface's address instead.
	ServerIP     netip.Addr
	Subnets      []Subnet
	Reservations []Reservation
	Boot         Boot
	// ServeDNS says the rack answers DNS on its serving address: subnets that name no DNS
	// servers get that address (the server identifier) as option 6.
	ServeDNS bool
	// Domain is the region's default domain, handed out as option 15; "" sends none.
	Domain string
}

// Subnet is one IPv4 network the rack serves.
type Subnet struct {
	ID         string // subnet UUID
	CIDR       netip.Prefix
	Gateway    netip.Addr   // optional
	DNS        []netip.Addr // optional
	RangeStart netip.Addr   // dynamic range, inclusive; both zero: reservations only
	RangeEnd   netip.Addr
	Excluded   []netip.Addr // never handed out dynamically (api.Subnet.ReservedIPs)
	// Network names the link the subnet is on (the rack uses the VLAN): subnets with the
	// same non-empty Network are one shared network, and a client on that link may get an
	// address from any of them. Empty: the subnet is alone on its link.
	Network    string
	LeaseTime  time.Duration
	NextServer netip.Addr // TFTP server for this subnet; zero means Boot.TFTPServer
}

// Reservation gives a known machine a fixed address (and hostname).
type Reservation struct {
	MAC        net.HardwareAddr
	Addr       netip.Addr
	Hostname   string
	MachineRef string // machine UUID
}

// Boot tells PXE clients where their boot files are.
type Boot struct {
	// TFTPServer serves undionly.kpxe, ipxe.efi and ipxe-arm64.efi; zero means the server itself.
	TFTPServer netip.Addr
	// HTTPBaseURL is the rack's HTTP boot service, e.g. "http://10.0.0.2:5248". iPXE
	// clients get <base>/ipxe/boot.ipxe, UEFI HTTP boot clients <base>/boot/<file>.
	// Empty disables both.
	HTTPBaseURL string
}

// DefaultLeaseTime applies to subnets that do not set one.
const DefaultLeaseTime = time.Hour

// SubnetFromAPI converts a region subnet into serving form; its VLAN is its Network.
func SubnetFromAPI(s api.Subnet) (Subnet, error) {
	var out Subnet
	var err error
	fail := func(field, value string, err error) (Subnet, error) {
		return Subnet{}, fmt.Errorf("subnet %s: %s %q: %w", s.Uuid, field, value, err)
	}
	out.ID = s.Uuid
	if out.CIDR, err = netip.ParsePrefix(s.CIDR); err != nil {
		return fail("CIDR", s.CIDR, err)
	}
	if out.Gateway, err = optionalAddr(s.Gateway); err != nil {
		return fail("Gateway", s.Gateway, err)
	}
	if out.NextServer, err = optionalAddr(s.NextServer); err != nil {
		return fail("NextServer", s.NextServer, err)
	}
	for _, d := range s.DNSServers {
		a, err := netip.ParseAddr(d)
		if err != nil {
			return fail("DNSServers", d, err)
		}
		out.DNS = append(out.DNS, a)
	}
	for _, r := range s.ReservedIPs {
		a, err := netip.ParseAddr(r)
		if err != nil {
			return fail("ReservedIPs", r, err)
		}
		out.Excluded = append(out.Excluded, a)
	}
	if s.DynamicRange != (api.IPRange{}) {
		if out.RangeStart, err = netip.ParseAddr(s.DynamicRange.Start); err != nil {
			return fail("DynamicRange.Start", s.DynamicRange.Start, err)
		}
		if out.RangeEnd, err = netip.ParseAddr(s.DynamicRange.End); err != nil {
			return fail("DynamicRange.End", s.DynamicRange.End, err)
		}
	}
	out.Network = s.VLAN
	out.LeaseTime = time.Duration(s.LeaseSeconds) * time.Second
	return out, nil
}

func optionalAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	return netip.ParseAddr(s)
}

// compiled is a validated Config with lookup structures.
type compiled struct {
	Config
	reserved    map[string]Reservation // by string(MAC)
	httpBaseURL string                 // without a trailing slash
}

func compile(cfg Config) (*compiled, []leases.Pool, error) {
	c := &compiled{Config: cfg, reserved: map[string]Reservation{}}
	if cfg.Boot.HTTPBaseURL != "" {
		u, err := url.Parse(cfg.Boot.HTTPBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, fmt.Errorf("boot HTTP base URL %q: want http://host[:port]", cfg.Boot.HTTPBaseURL)
		}
		c.httpBaseURL = strings.TrimSuffix(cfg.Boot.HTTPBaseURL, "/")
	}
	if cfg.Domain != "" {
		if err := regiondns.CheckName(cfg.Domain, false); err != nil {
			return nil, nil, fmt.Errorf("domain: %w", err)
		}
	}
	pools := make([]leases.Pool, len(cfg.Subnets))
	for i := range cfg.Subnets {
		s := &c.Subnets[i]
		if s.LeaseTime == 0 {
			s.LeaseTime = DefaultLeaseTime
		}
		if s.Gateway.IsValid() && !s.CIDR.Contains(s.Gateway) {
			return nil, nil, fmt.Errorf("subnet %s: gateway %s is not in %s", s.ID, s.Gateway, s.CIDR)
		}
		for _, d := range s.DNS {
			if !d.Is4() {
				return nil, nil, fmt.Errorf("subnet %s: DNS server %s is not IPv4", s.ID, d)
			}
		}
		for _, o := range cfg.Subnets[:i] {
			if o.CIDR.Overlaps(s.CIDR) {
				return nil, nil, fmt.Errorf("subnets %s (%s) and %s (%s) overlap", o.ID, o.CIDR, s.ID, s.CIDR)
			}
		}
		excluded := s.Excluded
		if s.Gateway.IsValid() {
			excluded = append(excluded[:len(excluded):len(excluded)], s.Gateway)
		}
		pools[i] = leases.Pool{Subnet: s.ID, Prefix: s.CIDR.Masked(), RangeStart: s.RangeStart, RangeEnd: s.RangeEnd,
			Excluded: excluded, LeaseTime: s.LeaseTime}
	}
	for _, r := range cfg.Reservations {
		i := c.subnetIndex(r.Addr)
		if i < 0 {
			return nil, nil, fmt.Errorf("reservation %s -> %s: address is in no configured subnet", r.MAC, r.Addr)
		}
		if _, dup := c.reserved[string(r.MAC)]; dup {
			return nil, nil, fmt.Errorf("reservation %s: MAC reserved twice", r.MAC)
		}
		c.reserved[string(r.MAC)] = r
		pools[i].Reservations = append(pools[i].Reservations, leases.Reservation{
			MAC: r.MAC, Addr: r.Addr, Hostname: r.Hostname, MachineRef: r.MachineRef})
	}
	return c, pools, nil
}

// reservedIn reports whether mac has a reservation in s.
func (c *compiled) reservedIn(s *Subnet, mac net.HardwareAddr) bool {
	r, ok := c.reserved[string(mac)]
	return ok && s.CIDR.Contains(r.Addr)
}

// dynamic reports whether s hands out addresses to clients without a reservation.
func (s *Subnet) dynamic() bool { return s.RangeStart.IsValid() }

// sharedNetwork returns the subnets on the link of the subnet containing a (that subnet
// first, then the others of its Network in configuration order), or nil.
func (c *compiled) sharedNetwork(a netip.Addr) []*Subnet {
	i := c.subnetIndex(a)
	if i < 0 {
		return nil
	}
	link := []*Subnet{&c.Subnets[i]}
	if c.Subnets[i].Network == "" {
		return link
	}
	for j := range c.Subnets {
		if j != i && c.Subnets[j].Network == c.Subnets[i].Network {
			link = append(link, &c.Subnets[j])
		}
	}
	return link
}

// containing returns the subnet of network that contains a, or nil.
func containing(network []*Subnet, a netip.Addr) *Subnet {
	for _, s := range network {
		if s.CIDR.Contains(a) {
			return s
		}
	}
	return nil
}

func (c *compiled) subnetIndex(a netip.Addr) int {
	for i := range c.Subnets {
		if c.Subnets[i].CIDR.Contains(a) {
			return i
		}
	}
	return -1
}

// subnetOf returns the subnet containing a, or nil.
func (c *compiled) subnetOf(a netip.Addr) *Subnet {
	if i := c.subnetIndex(a); i >= 0 {
		return &c.Subnets[i]
	}
	return nil
}
