package dhcp

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/ironflow/ironflow/rack/leases"
)

// Leases is the lease table as the handler uses it (implemented by *leases.Table).
type Leases interface {
	Configure(pools []leases.Pool) error
	Offer(subnet string, mac net.HardwareAddr, requested netip.Addr) (netip.Addr, error)
	Grant(subnet string, mac net.HardwareAddr, addr netip.Addr, hostname string) (leases.Lease, error)
	Release(subnet string, mac net.HardwareAddr, addr netip.Addr) error
	Decline(subnet string, mac net.HardwareAddr, addr netip.Addr) error
	LookupMAC(subnet string, mac net.HardwareAddr) (leases.Lease, bool)
}

// Reasons a request gets no reply; Handle returns them wrapped for the log.
var (
	ErrNotRequest  = errors.New("not a BOOTREQUEST")
	ErrNoSubnet    = errors.New("no configured subnet on the client's link")
	ErrUnsupported = errors.New("unsupported DHCP message type")
	ErrMalformed   = errors.New("malformed request")
	// ErrNoReservation: the client's link has subnets, but none with a dynamic range and
	// none where the client has a reservation.
	ErrNoReservation = errors.New("no reservation for the client and no dynamic range on its link")
)

// Handler turns a DHCP request into a reply. It holds no sockets, so it can be tested and
// fuzzed directly; Server feeds it.
type Handler struct {
	leases  Leases
	metrics *Metrics
	log     *slog.Logger
	cfg     atomic.Pointer[compiled]
}

// NewHandler validates cfg, configures the lease table's pools from it and returns a handler.
func NewHandler(cfg Config, l Leases, m *Metrics, log *slog.Logger) (*Handler, error) {
	if log == nil {
		log = slog.Default()
	}
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	h := &Handler{leases: l, metrics: m, log: log}
	if err := h.Configure(cfg); err != nil {
		return nil, err
	}
	return h, nil
}

// Configure replaces the configuration; on error the previous one stays in force.
func (h *Handler) Configure(cfg Config) error {
	c, pools, err := compile(cfg)
	if err != nil {
		return fmt.Errorf("dhcp config: %w", err)
	}
	if err := h.leases.Configure(pools); err != nil {
		return fmt.Errorf("dhcp config: %w", err)
	}
	h.cfg.Store(c)
	return nil
}

// Handle answers req, which arrived at a server whose address on the client's side is
// serverIP (an interface address, or Config.ServerIP on the relay socket). A nil reply
// with a nil error means no reply is due (RELEASE, DECLINE, a REQUEST for another server).
func (h *Handler) Handle(req *dhcpv4.DHCPv4, serverIP netip.Addr) (*dhcpv4.DHCPv4, error) {
	start := time.Now()
	resp, err := h.handle(req, serverIP)
	h.metrics.observe(req, resp, err, time.Since(start))
	return resp, err
}

func (h *Handler) handle(req *dhcpv4.DHCPv4, serverIP netip.Addr) (*dhcpv4.DHCPv4, error) {
	if req.OpCode != dhcpv4.OpcodeBootRequest {
		return nil, ErrNotRequest
	}
	if len(req.ClientHWAddr) == 0 {
		return nil, fmt.Errorf("%w: no client hardware address", ErrMalformed)
	}
	c := h.cfg.Load()
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		return h.discover(c, req, serverIP)
	case dhcpv4.MessageTypeRequest:
		return h.request(c, req, serverIP)
	case dhcpv4.MessageTypeRelease:
		return nil, h.release(c, req, serverIP)
	case dhcpv4.MessageTypeDecline:
		return nil, h.decline(c, req, serverIP)
	case dhcpv4.MessageTypeInform:
		return h.inform(c, req, serverIP)
	default:
		return nil, fmt.Errorf("%w %s from %s", ErrUnsupported, req.MessageType(), req.ClientHWAddr)
	}
}

// addr converts a packet address; zero, missing and malformed addresses are invalid.
func addr(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip.To4())
	if !ok || a.IsUnspecified() {
		return netip.Addr{}
	}
	return a
}

// link is the address that names the client's network: the relay's giaddr, else the
// client's own address when it has one, else the address the request arrived on.
func link(req *dhcpv4.DHCPv4, serverIP netip.Addr, useCiaddr bool) netip.Addr {
	if g := addr(req.GatewayIPAddr); g.IsValid() {
		return g
	}
	if ci := addr(req.ClientIPAddr); useCiaddr && ci.IsValid() {
		return ci
	}
	return serverIP
}

func (h *Handler) discover(c *compiled, req *dhcpv4.DHCPv4, serverIP netip.Addr) (*dhcpv4.DHCPv4, error) {
	via := link(req, serverIP, false)
	network := c.sharedNetwork(via)
	if network == nil {
		return nil, fmt.Errorf("DISCOVER from %s via %s: %w", req.ClientHWAddr, via, ErrNoSubnet)
	}
	var exhausted error
	for _, s := range h.candidates(c, network, req) {
		if !s.dynamic() && !c.reservedIn(s, req.ClientHWAddr) {
			continue
		}
		a, err := h.leases.Offer(s.ID, req.ClientHWAddr, addr(req.RequestedIPAddress()))
		if errors.Is(err, leases.ErrExhausted) {
			exhausted = err
			continue // the next subnet of a shared network may have room
		}
		if err != nil {
			return nil, fmt.Errorf("DISCOVER from %s: %w", req.ClientHWAddr, err)
		}
		hostname := ""
		if r, ok := c.reserved[string(req.ClientHWAddr)]; ok && r.Addr == a {
			hostname = r.Hostname
		}
		return c.reply(req, s, serverIP, dhcpv4.MessageTypeOffer, a, hostname), nil
	}
	if exhausted == nil {
		return nil, fmt.Errorf("DISCOVER from %s via %s: %w", req.ClientHWAddr, via, ErrNoReservation)
	}
	h.metrics.exhausted.Inc()
	h.log.Warn("DHCP pool exhausted: no offer", "subnet", network[0].ID, "cidr", network[0].CIDR, "subnets_on_link", len(network), "mac", req.ClientHWAddr)
	return nil, fmt.Errorf("DISCOVER from %s: %w", req.ClientHWAddr, exhausted)
}

// candidates orders the subnets of a client's link for an offer: the subnet of its
// reservation, of the lease it holds or held, of the address it asks for, then the others.
func (h *Handler) candidates(c *compiled, network []*Subnet, req *dhcpv4.DHCPv4) []*Subnet {
	if len(network) == 1 {
		return network
	}
	var prefer []netip.Addr
	if r, ok := c.reserved[string(req.ClientHWAddr)]; ok {
		prefer = append(prefer, r.Addr)
	}
	for _, s := range network {
		if l, ok := h.leases.LookupMAC(s.ID, req.ClientHWAddr); ok {
			prefer = append(prefer, l.Addr)
		}
	}
	prefer = append(prefer, addr(req.RequestedIPAddress()))
	ordered := make([]*Subnet, 0, len(network))
	for _, a := range prefer {
		if s := containing(network, a); s != nil && !slices.Contains(ordered, s) {
			ordered = append(ordered, s)
		}
	}
	for _, s := range network {
		if !slices.Contains(ordered, s) {
			ordered = append(ordered, s)
		}
	}
	return ordered
}

func (h *Handler) request(c *compiled, req *dhcpv4.DHCPv4, serverIP netip.Addr) (*dhcpv4.DHCPv4, error) {
	sid, requested, ciaddr := addr(req.ServerIdentifier()), addr(req.RequestedIPAddress()), addr(req.ClientIPAddr)
	var want netip.Addr
	switch {
	case sid.IsValid(): // SELECTING: the client answers one server's offer
		if sid != serverIP {
			return nil, nil
		}
		want = requested
	case ciaddr.IsValid(): // RENEWING (unicast) or REBINDING (broadcast)
		want = ciaddr
	default: // INIT-REBOOT: the client checks its remembered address
		want = requested
	}
	network := c.sharedNetwork(link(req, serverIP, true))
	if network == nil {
		if ciaddr.IsValid() {
			return c.nak(req, serverIP, fmt.Sprintf("%s is not on a network this server serves", ciaddr)), nil
		}
		return nil, fmt.Errorf("REQUEST from %s via %s: %w", req.ClientHWAddr, link(req, serverIP, true), ErrNoSubnet)
	}
	if !want.IsValid() {
		return c.nak(req, serverIP, "no address requested"), nil
	}
	s := containing(network, want)
	if s == nil {
		return c.nak(req, serverIP, fmt.Sprintf("%s is not on network %s", want, network[0].CIDR)), nil
	}
	l, err := h.leases.Grant(s.ID, req.ClientHWAddr, want, req.HostName())
	switch {
	case errors.Is(err, leases.ErrConflict), errors.Is(err, leases.ErrNotOurs), errors.Is(err, leases.ErrInvalid):
		return c.nak(req, serverIP, err.Error()), nil
	case err != nil:
		return nil, fmt.Errorf("REQUEST from %s for %s: %w", req.ClientHWAddr, want, err)
	}
	resp := c.reply(req, s, serverIP, dhcpv4.MessageTypeAck, l.Addr, l.Hostname)
	resp.ClientIPAddr = req.ClientIPAddr
	return resp, nil
}

func (h *Handler) release(c *compiled, req *dhcpv4.DHCPv4, serverIP netip.Addr) error {
	ciaddr := addr(req.ClientIPAddr)
	if sid := addr(req.ServerIdentifier()); sid.IsValid() && sid != serverIP {
		return nil
	}
	s := c.subnetOf(ciaddr)
	if s == nil {
		return fmt.Errorf("RELEASE of %q from %s: %w", ciaddr, req.ClientHWAddr, ErrNoSubnet)
	}
	if err := h.leases.Release(s.ID, req.ClientHWAddr, ciaddr); err != nil {
		return fmt.Errorf("RELEASE from %s: %w", req.ClientHWAddr, err)
	}
	return nil
}

func (h *Handler) decline(c *compiled, req *dhcpv4.DHCPv4, serverIP netip.Addr) error {
	a := addr(req.RequestedIPAddress())
	if sid := addr(req.ServerIdentifier()); sid.IsValid() && sid != serverIP {
		return nil
	}
	s := c.subnetOf(a)
	if s == nil {
		return fmt.Errorf("DECLINE of %q from %s: %w", a, req.ClientHWAddr, ErrNoSubnet)
	}
	if err := h.leases.Decline(s.ID, req.ClientHWAddr, a); err != nil {
		return fmt.Errorf("DECLINE from %s: %w", req.ClientHWAddr, err)
	}
	h.log.Warn("client declined an address: quarantined", "addr", a, "mac", req.ClientHWAddr)
	return nil
}

// inform answers a client that configured its address itself: options only, no lease.
func (h *Handler) inform(c *compiled, req *dhcpv4.DHCPv4, serverIP netip.Addr) (*dhcpv4.DHCPv4, error) {
	ciaddr := addr(req.ClientIPAddr)
	if !ciaddr.IsValid() {
		return nil, fmt.Errorf("%w: INFORM without ciaddr from %s", ErrMalformed, req.ClientHWAddr)
	}
	network := c.sharedNetwork(link(req, serverIP, true))
	if network == nil {
		return nil, fmt.Errorf("INFORM from %s (%s): %w", req.ClientHWAddr, ciaddr, ErrNoSubnet)
	}
	s := cmp.Or(containing(network, ciaddr), network[0])
	resp := c.reply(req, s, serverIP, dhcpv4.MessageTypeAck, netip.Addr{}, "")
	resp.ClientIPAddr = req.ClientIPAddr
	resp.Options.Del(dhcpv4.OptionIPAddressLeaseTime)
	resp.Options.Del(dhcpv4.OptionRenewTimeValue)
	resp.Options.Del(dhcpv4.OptionRebindingTimeValue)
	return resp, nil
}

// newReply starts a reply to req (built directly: dhcpv4.New draws a random xid we'd discard).
func newReply(req *dhcpv4.DHCPv4, serverIP netip.Addr, t dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	resp := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		GatewayIPAddr: req.GatewayIPAddr,
		ClientHWAddr:  req.ClientHWAddr,
		Options:       dhcpv4.Options{},
	}
	resp.UpdateOption(dhcpv4.OptMessageType(t))
	resp.UpdateOption(dhcpv4.OptServerIdentifier(serverIP.AsSlice()))
	for _, code := range []dhcpv4.OptionCode{dhcpv4.OptionRelayAgentInformation, dhcpv4.OptionClientIdentifier} {
		if v := req.Options.Get(code); v != nil {
			resp.UpdateOption(dhcpv4.OptGeneric(code, v))
		}
	}
	return resp
}

// reply builds an OFFER or ACK of yiaddr (zero for INFORM) with the subnet's options.
func (c *compiled) reply(req *dhcpv4.DHCPv4, s *Subnet, serverIP netip.Addr, t dhcpv4.MessageType, yiaddr netip.Addr, hostname string) *dhcpv4.DHCPv4 {
	resp := newReply(req, serverIP, t)
	if yiaddr.IsValid() {
		resp.YourIPAddr = yiaddr.AsSlice()
	}
	resp.UpdateOption(dhcpv4.OptSubnetMask(net.CIDRMask(s.CIDR.Bits(), 32)))
	resp.UpdateOption(dhcpv4.OptIPAddressLeaseTime(s.LeaseTime))
	resp.UpdateOption(dhcpv4.OptRenewTimeValue(s.LeaseTime / 2))
	resp.UpdateOption(dhcpv4.OptRebindingTimeValue(s.LeaseTime * 7 / 8))
	if s.Gateway.IsValid() {
		resp.UpdateOption(dhcpv4.OptRouter(s.Gateway.AsSlice()))
	}
	servers := s.DNS
	if len(servers) == 0 && c.ServeDNS {
		servers = []netip.Addr{serverIP}
	}
	if len(servers) > 0 {
		dns := make([]net.IP, len(servers))
		for i, d := range servers {
			dns[i] = d.AsSlice()
		}
		resp.UpdateOption(dhcpv4.OptDNS(dns...))
	}
	if c.Domain != "" {
		resp.UpdateOption(dhcpv4.OptDomainName(c.Domain))
	}
	if hostname != "" {
		resp.UpdateOption(dhcpv4.OptHostName(hostname))
	}
	if bp, ok := c.bootFor(req, s, serverIP); ok {
		bp.apply(resp)
	}
	return resp
}

// nak refuses a REQUEST; relays must broadcast it to the client (RFC 2131 4.3.2).
func (c *compiled) nak(req *dhcpv4.DHCPv4, serverIP netip.Addr, why string) *dhcpv4.DHCPv4 {
	resp := newReply(req, serverIP, dhcpv4.MessageTypeNak)
	resp.UpdateOption(dhcpv4.OptMessage(why))
	if addr(req.GatewayIPAddr).IsValid() {
		resp.SetBroadcast()
	}
	return resp
}
