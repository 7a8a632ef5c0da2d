package rack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/ironflow/ironflow/rack/dhcp"
	"github.com/ironflow/ironflow/rack/dns"
	"github.com/ironflow/ironflow/rack/httpboot"
	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/region/api"
)

// BootEnvBoot is what a machine in boot env env boots: the kernel and initrd under the boot
// directory's folder of that name (env/vmlinuz, env/initrd.img); "local" boots from disk.
func BootEnvBoot(env string) httpboot.Boot {
	if env == httpboot.BootEnvLocal {
		return httpboot.Boot{BootEnv: env}
	}
	return httpboot.Boot{BootEnv: env, Kernel: env + "/vmlinuz", Initrds: []string{env + "/initrd.img"}}
}

// DHCP is the part of the DHCP handler the config applier drives (*dhcp.Handler).
type DHCP interface {
	Configure(cfg dhcp.Config) error
}

// OwnLeases is the rack's own lease table as the config applier consults it (*leases.Table).
type OwnLeases interface {
	Lookup(addr netip.Addr) (leases.Lease, bool)
	LookupMAC(subnet string, mac net.HardwareAddr) (leases.Lease, bool)
}

// DNS is the part of the rack's DNS server the config applier drives (*dns.Server).
type DNS interface {
	Configure(dns.Settings)
}

// applier turns the region's rack config into the DHCP config, the DNS and proxy settings
// and the machine boot table, all or nothing: a config that DHCP refuses leaves them as they were.
type applier struct {
	rack  string // this rack's UUID
	dhcp  DHCP
	dns   DNS           // nil when the rack serves no DNS
	proxy *proxyService // nil when the rack serves no HTTP proxy
	own   OwnLeases
	base  dhcp.Config // ServerIP and Boot, which come from the rack's own options
	log   *slog.Logger
	boots atomic.Pointer[map[string]httpboot.Boot] // by MAC string
	// reserved maps the addresses DHCP reserves (machines' and other racks' leases) to their MACs.
	reserved atomic.Pointer[map[netip.Addr]net.HardwareAddr]
	served   atomic.Pointer[[]netip.Prefix] // the config's subnets (Serves)
}

func newApplier(rack string, d DHCP, own OwnLeases, base dhcp.Config, log *slog.Logger) *applier {
	a := &applier{rack: rack, dhcp: d, own: own, base: base, log: log}
	a.boots.Store(&map[string]httpboot.Boot{})
	a.reserved.Store(&map[netip.Addr]net.HardwareAddr{})
	a.served.Store(&[]netip.Prefix{})
	return a
}

// apply is the region link's OnConfig.
func (a *applier) apply(raw json.RawMessage) error {
	var cfg api.RackConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("decode rack config: %w", err)
	}
	dc, boots, err := a.translate(cfg)
	if err != nil {
		return err
	}
	ds, err := dnsSettings(cfg)
	if err != nil {
		return err
	}
	ps, cacheBytes, err := proxySettings(cfg)
	if err != nil {
		return err
	}
	if err := a.dhcp.Configure(dc); err != nil {
		return err
	}
	if a.dns != nil {
		a.dns.Configure(ds)
	}
	if a.proxy != nil {
		a.proxy.configure(ps, cacheBytes)
	}
	a.boots.Store(&boots)
	reserved := make(map[netip.Addr]net.HardwareAddr, len(dc.Reservations))
	for _, r := range dc.Reservations {
		reserved[r.Addr] = r.MAC
	}
	a.reserved.Store(&reserved)
	a.served.Store(&ds.Served)
	a.log.Info("rack config applied", "subnets", len(dc.Subnets), "reservations", len(dc.Reservations))
	return nil
}

// translate converts a rack config. Subnets of one VLAN are one shared network (a client on
// that link may get an address from any of them); a subnet without a dynamic range serves its
// reservations only. Active leases that other racks granted (a rack taking over a VLAN, or moved to a region that knows them) are
// honoured as reservations, so their clients keep their addresses and no one else gets
// them; machine reservations win over them.
func (a *applier) translate(cfg api.RackConfig) (dhcp.Config, map[string]httpboot.Boot, error) {
	dc := a.base
	dc.Subnets, dc.Reservations = nil, nil
	dc.Domain = cfg.DNS.Domain
	served := map[string]bool{}
	for _, s := range cfg.Subnets {
		sub, err := dhcp.SubnetFromAPI(s)
		if err != nil {
			return dhcp.Config{}, nil, err
		}
		dc.Subnets = append(dc.Subnets, sub)
		served[s.Uuid] = true
	}
	boots := make(map[string]httpboot.Boot, len(cfg.Reservations))
	for _, r := range cfg.Reservations {
		mac, err := net.ParseMAC(r.MAC)
		if err != nil {
			return dhcp.Config{}, nil, fmt.Errorf("reservation of machine %s: MAC %q: %w", r.Machine, r.MAC, err)
		}
		if r.BootEnv != "" {
			boots[mac.String()] = BootEnvBoot(r.BootEnv)
		}
		if !served[r.Subnet] {
			continue
		}
		addr, err := netip.ParseAddr(r.Addr)
		if err != nil {
			return dhcp.Config{}, nil, fmt.Errorf("reservation of machine %s: address %q: %w", r.Machine, r.Addr, err)
		}
		dc.Reservations = append(dc.Reservations, dhcp.Reservation{MAC: mac, Addr: addr, Hostname: r.Hostname, MachineRef: r.Machine})
	}
	return dc, boots, a.honourLeases(&dc, cfg.Leases, served)
}

// dnsSettings are the DNS server's settings of a rack config: the region's zones, its
// upstream resolvers and serial, and the served subnets, whose clients may recurse.
func dnsSettings(cfg api.RackConfig) (dns.Settings, error) {
	st := dns.Settings{Zones: cfg.DNS.Zones, Serial: cfg.DNS.Serial, Region: cfg.DNS.Region}
	for _, u := range cfg.DNS.Upstreams {
		ap, err := netip.ParseAddrPort(u)
		if err != nil {
			return dns.Settings{}, fmt.Errorf("DNS upstream %q: %w", u, err)
		}
		st.Upstreams = append(st.Upstreams, ap)
	}
	for _, s := range cfg.Subnets {
		p, err := netip.ParsePrefix(s.CIDR)
		if err != nil {
			return dns.Settings{}, fmt.Errorf("subnet %s: CIDR %q: %w", s.Uuid, s.CIDR, err)
		}
		st.Served = append(st.Served, p)
	}
	return st, nil
}

// honourLeases adds a reservation for each active lease of another rack in a served subnet
// whose MAC and address are not reserved yet. The rack trusts its own active leases over
// what the region reports of others: a lease that contradicts one (the address granted here
// to another client, or the client holding another address here) is ignored, so a wrong or
// forged report cannot take a client's address away.
func (a *applier) honourLeases(dc *dhcp.Config, reported []api.Lease, served map[string]bool) error {
	macs, addrs := map[string]bool{}, map[netip.Addr]bool{}
	for _, r := range dc.Reservations {
		macs[r.MAC.String()], addrs[r.Addr] = true, true
	}
	for _, l := range reported {
		if l.Rack == a.rack || l.State != "active" || !served[l.Subnet] {
			continue
		}
		mac, err := net.ParseMAC(l.MAC)
		if err != nil {
			return fmt.Errorf("lease of %s: MAC %q: %w", l.Addr, l.MAC, err)
		}
		addr, err := netip.ParseAddr(l.Addr)
		if err != nil {
			return fmt.Errorf("lease of %s: address: %w", l.MAC, err)
		}
		if macs[mac.String()] || addrs[addr] {
			continue
		}
		if own, ok := a.ownConflict(l.Subnet, mac, addr); ok {
			a.log.Warn("the region reports a lease of another rack that conflicts with an active lease of this rack; keeping ours",
				"addr", addr, "mac", mac, "rack", l.Rack, "own_addr", own.Addr, "own_mac", own.MAC)
			continue
		}
		macs[mac.String()], addrs[addr] = true, true
		dc.Reservations = append(dc.Reservations, dhcp.Reservation{MAC: mac, Addr: addr, Hostname: l.Hostname, MachineRef: l.MachineRef})
	}
	return nil
}

// ownConflict returns this rack's active lease that a reported lease of mac on addr
// contradicts: addr held here by another client, or mac holding another address here.
func (a *applier) ownConflict(subnet string, mac net.HardwareAddr, addr netip.Addr) (leases.Lease, bool) {
	if l, ok := a.own.Lookup(addr); ok && l.State == leases.Active && !bytes.Equal(l.MAC, mac) {
		return l, true
	}
	if l, ok := a.own.LookupMAC(subnet, mac); ok && l.State == leases.Active && l.Addr != addr {
		return l, true
	}
	return leases.Lease{}, false
}

// BootByMAC implements httpboot.MachineLookup from the applied config: a machine with a
// reservation and a boot env boots that; any other MAC boots the discovery environment.
func (a *applier) BootByMAC(_ context.Context, mac net.HardwareAddr) (httpboot.Boot, bool, error) {
	b, ok := (*a.boots.Load())[mac.String()]
	return b, ok, nil
}

// Attribute implements syslog.Attributor: the MAC of the client holding addr, by the rack's
// active lease on it, else by the reservation DHCP serves for it.
func (a *applier) Attribute(addr netip.Addr) (net.HardwareAddr, bool) {
	if l, ok := a.own.Lookup(addr); ok && l.State == leases.Active {
		return l.MAC, true
	}
	mac, ok := (*a.reserved.Load())[addr]
	return mac, ok
}
