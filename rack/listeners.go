package rack

// Listener is one socket a serving rack answers its network on. The abuse suite
// (integration/abuse_rack_test.go) walks every one and fails on a listener it does not cover.
type Listener struct {
	Service string // what answers there: ServiceDHCP, ServiceTFTP, …
	Network string // "udp", "tcp", or "link" for the raw sockets of an interface
	Addr    string // "ip:port", or the interface name
	Option  string // the Options field that opens it
}

// The services of a rack's listeners. The HTTP listener carries three of them.
const (
	ServiceDHCP        = "dhcp"         // broadcast DHCP on an interface
	ServiceDHCPRelay   = "dhcp-relay"   // relayed DHCP
	ServiceRouterAdv   = "router-adv"   // IPv6 router advertisements on an interface
	ServiceTFTP        = "tftp"         // the boot directory
	ServiceHTTPBoot    = "http-boot"    // iPXE scripts, boot assets, the iPXE enlistment report
	ServiceAgentEnlist = "agent-enlist" // the discovery environment's enlistment and its scripts
	ServiceAgentProxy  = "agent-proxy"  // the agent API and metadata, proxied to the region
	ServiceDNS         = "dns"
	ServiceSyslog      = "syslog"
	ServiceProxy       = "proxy" // the HTTP proxy for machines
)

// Listeners lists the sockets Serve opens for o, after its defaults (DNS on every DHCP
// interface when o names no DNS address, the proxy likewise).
func (o Options) Listeners() ([]Listener, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	var out []Listener
	for _, ifname := range o.DHCPInterfaces {
		out = append(out, Listener{ServiceDHCP, "link", ifname, "DHCPInterfaces"})
		if o.RouterAdvertisements {
			out = append(out, Listener{ServiceRouterAdv, "link", ifname, "RouterAdvertisements"})
		}
	}
	if o.DHCPRelayListen != "" {
		out = append(out, Listener{ServiceDHCPRelay, "udp", o.DHCPRelayListen, "DHCPRelayListen"})
	}
	if o.TFTPListen != "" {
		out = append(out, Listener{ServiceTFTP, "udp", o.TFTPListen, "TFTPListen"})
	}
	if o.HTTPListen != "" {
		for _, service := range []string{ServiceHTTPBoot, ServiceAgentEnlist, ServiceAgentProxy} {
			out = append(out, Listener{service, "tcp", o.HTTPListen, "HTTPListen"})
		}
	}
	for _, addr := range o.DNSListen {
		out = append(out, Listener{ServiceDNS, "udp", addr, "DNSListen"}, Listener{ServiceDNS, "tcp", addr, "DNSListen"})
	}
	for _, addr := range o.ProxyListen {
		out = append(out, Listener{ServiceProxy, "tcp", addr, "ProxyListen"})
	}
	if o.SyslogListen != "" {
		out = append(out, Listener{ServiceSyslog, "udp", o.SyslogListen, "SyslogListen"}, Listener{ServiceSyslog, "tcp", o.SyslogListen, "SyslogListen"})
	}
	return out, nil
}

// Name is what the listener serves and how: "dns/udp".
func (l Listener) Name() string { return l.Service + "/" + l.Network }

// String names l in test output: "dns/udp 127.0.0.1:53".
func (l Listener) String() string { return l.Name() + " " + l.Addr }
