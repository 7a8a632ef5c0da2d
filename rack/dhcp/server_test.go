package dhcp

import (
	"context"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/leases"
)

// loopNet is a loopback /12 per test process, so that the relay agents the tests play
// (which must listen on giaddr:67) do not collide with another run.
func loopNet() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(16 * (1 + os.Getpid()%15)), 0, 0}), 12)
}

// loopAddr returns the address of loopNet with the given last two bytes.
func loopAddr(hi, lo byte) netip.Addr {
	b := loopNet().Addr().As4()
	b[2], b[3] = hi, lo
	return netip.AddrFrom4(b)
}

// loopConfig serves loopNet: relay agents live in its first four /24s, leases (a million
// of them) come from the rest.
func loopConfig() Config {
	last := loopNet().Addr().As4()
	last[1], last[2], last[3] = last[1]+15, 255, 254
	return Config{
		ServerIP: netip.MustParseAddr("127.0.0.1"),
		Subnets: []Subnet{{
			ID: subnetID, CIDR: loopNet(), Gateway: loopAddr(0, 1),
			RangeStart: loopAddr(4, 0), RangeEnd: netip.AddrFrom4(last), LeaseTime: time.Hour,
		}},
		Boot: Boot{HTTPBaseURL: "http://127.0.0.1:5248"},
	}
}

// startRelayServer serves f's handler on a relay socket at 127.0.0.1:<ephemeral>.
func startRelayServer(t testing.TB, f *fixture) *net.UDPAddr {
	t.Helper()
	srv, err := NewServer(f.h, ServerConfig{RelayAddr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	return srv.RelayAddr()
}

// serve runs srv until the test ends and checks that it stopped cleanly.
func serve(t testing.TB, srv *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// listenUDP opens a UDP socket on a (with SO_REUSEADDR, like a DHCP daemon would).
func listenUDP(t testing.TB, a netip.Addr, port int) *net.UDPConn {
	t.Helper()
	if port < 1024 && os.Geteuid() != 0 {
		t.Skipf("skipping: listening on port %d (as a relay agent or client) needs root", port)
	}
	conn, err := server4.NewIPv4UDPConn("", &net.UDPAddr{IP: a.AsSlice(), Port: port})
	if err != nil {
		t.Fatalf("listen on %s:%d: %v", a, port, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// exchange sends req to dst from conn and waits for the reply with req's xid.
func exchange(t testing.TB, conn *net.UDPConn, dst *net.UDPAddr, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	t.Helper()
	if _, err := conn.WriteTo(req.ToBytes(), dst); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			t.Fatalf("waiting for the reply to %s: %v", req.MessageType(), err)
		}
		resp, err := dhcpv4.FromBytes(buf[:n])
		if err == nil && resp.TransactionID == req.TransactionID {
			return resp
		}
	}
}

func newClient(t *testing.T, conn net.PacketConn, mac net.HardwareAddr, server *net.UDPAddr) *nclient4.Client {
	t.Helper()
	c, err := nclient4.NewWithConn(conn, mac, nclient4.WithServerAddr(server), nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRelayedDORARenewRelease runs the insomniacslk client through a relay agent played by
// the test: requests carry giaddr and the server answers to giaddr:67.
func TestRelayedDORARenewRelease(t *testing.T) {
	f := newFixture(t, loopConfig())
	server := startRelayServer(t, f)
	giaddr := loopAddr(0, 2)
	mac := hw(1)
	relay := newClient(t, listenUDP(t, giaddr, dhcpv4.ServerPort), mac, server)

	ctx := context.Background()
	lease, err := relay.Request(ctx, dhcpv4.WithRelay(giaddr.AsSlice()), dhcpv4.WithOption(dhcpv4.OptHostName("node-1")))
	if err != nil {
		t.Fatalf("DORA through the relay: %v", err)
	}
	leased := addr(lease.ACK.YourIPAddr)
	if !loopNet().Contains(leased) || addr(lease.ACK.GatewayIPAddr) != giaddr || addr(lease.ACK.ServerIdentifier()) != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("ACK: %s", lease.ACK.Summary())
	}
	if l, ok := f.table.Lookup(leased); !ok || l.State != leases.Active || l.Hostname != "node-1" {
		t.Fatalf("lease in table: %+v", l)
	}

	// Renewing: the client unicasts from its new address; the ACK comes back to it on :68.
	self := listenUDP(t, leased, dhcpv4.ClientPort)
	client := newClient(t, self, mac, server)
	renewed, err := client.Renew(ctx, lease)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	if addr(renewed.ACK.YourIPAddr) != leased {
		t.Fatalf("renewal moved the client to %s", renewed.ACK.YourIPAddr)
	}

	release := must(dhcpv4.NewReleaseFromACK(renewed.ACK))
	if _, err := self.WriteTo(release.ToBytes(), server); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the release", func() bool { l, _ := f.table.Lookup(leased); return l.State == leases.Released })
}

func TestNAKOverTheWire(t *testing.T) {
	f := newFixture(t, loopConfig())
	server := startRelayServer(t, f)
	giaddr := loopAddr(0, 3)
	relay := listenUDP(t, giaddr, dhcpv4.ServerPort)

	// INIT-REBOOT for an address of another network, relayed.
	req := must(dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(hw(4)),
		dhcpv4.WithRelay(giaddr.AsSlice()), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("192.168.1.7")))))
	nak := exchange(t, relay, server, req)
	if nak.MessageType() != dhcpv4.MessageTypeNak || !nak.IsBroadcast() {
		t.Fatalf("want a NAK with the broadcast bit for the relay, got %s", nak.Summary())
	}
}

// TestGarbageDoesNotStopTheServer sends malformed, truncated and odd packets, then checks
// that a DORA still works.
func TestGarbageDoesNotStopTheServer(t *testing.T) {
	f := newFixture(t, loopConfig())
	server := startRelayServer(t, f)
	giaddr := loopAddr(0, 4)
	relay := listenUDP(t, giaddr, dhcpv4.ServerPort)

	valid := must(dhcpv4.NewDiscovery(hw(5), dhcpv4.WithRelay(giaddr.AsSlice()),
		dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(250), []byte("unknown option"))))
	b := valid.ToBytes()
	noEnd := append([]byte(nil), b[:240]...)
	noEnd = append(noEnd, byte(dhcpv4.OptionDHCPMessageType), 1, 1) // options without the end mark
	badLen := append([]byte(nil), b[:240]...)
	badLen = append(badLen, byte(dhcpv4.OptionHostName), 200, 'x') // option longer than the packet
	badCookie := append([]byte(nil), b...)
	badCookie[236] = 0
	local := must(dhcpv4.NewDiscovery(hw(6))).ToBytes() // not relayed: not for the relay socket
	garbage := [][]byte{local, {}, {1}, b[:100], b[:239], noEnd, badLen, badCookie, make([]byte, 1400)}
	for _, g := range garbage {
		if _, err := relay.WriteTo(g, server); err != nil {
			t.Fatal(err)
		}
	}
	offer := exchange(t, relay, server, valid)
	if offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("after garbage: %s", offer.Summary())
	}
	if n := f.latencyCount(t, "DISCOVER"); n != 1 {
		t.Fatalf("%d DISCOVERs handled, want only the relayed one", n)
	}
}

func TestNewServerErrors(t *testing.T) {
	cfg := loopConfig()
	cfg.ServerIP = netip.Addr{}
	f := newFixture(t, cfg)
	cases := map[string]ServerConfig{
		"nothing to listen on":            {},
		"bad relay address":               {RelayAddr: "127.0.0.1:http-nope"},
		"missing interface":               {Interfaces: []string{"nosuchif0"}},
		"wildcard relay without ServerIP": {RelayAddr: "0.0.0.0:0"},
	}
	for name, cfg := range cases {
		cfg.Logger = quiet
		if srv, err := NewServer(f.h, cfg); err == nil {
			srv.close()
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestReplyDestinations(t *testing.T) {
	pkt := func(t dhcpv4.MessageType, giaddr, ciaddr string) (*dhcpv4.DHCPv4, *dhcpv4.DHCPv4) {
		req := must(dhcpv4.New(dhcpv4.WithGatewayIP(net.ParseIP(giaddr)), dhcpv4.WithClientIP(net.ParseIP(ciaddr))))
		return req, must(dhcpv4.New(dhcpv4.WithMessageType(t)))
	}
	cases := []struct {
		name         string
		t            dhcpv4.MessageType
		giaddr       string
		ciaddr       string
		canBroadcast bool
		want         string // "" for none
	}{
		{"relayed", dhcpv4.MessageTypeOffer, "10.0.0.1", "0.0.0.0", true, "10.0.0.1:67"},
		{"relayed NAK", dhcpv4.MessageTypeNak, "10.0.0.1", "10.0.0.7", false, "10.0.0.1:67"},
		{"renewing client", dhcpv4.MessageTypeAck, "0.0.0.0", "10.0.0.7", true, "10.0.0.7:68"},
		{"NAK on a link", dhcpv4.MessageTypeNak, "0.0.0.0", "10.0.0.7", true, "255.255.255.255:68"},
		{"NAK on the relay socket", dhcpv4.MessageTypeNak, "0.0.0.0", "10.0.0.7", false, "10.0.0.7:68"},
		{"new client on a link", dhcpv4.MessageTypeOffer, "0.0.0.0", "0.0.0.0", true, "255.255.255.255:68"},
		{"new client on the relay socket", dhcpv4.MessageTypeOffer, "0.0.0.0", "0.0.0.0", false, ""},
	}
	for _, tc := range cases {
		req, resp := pkt(tc.t, tc.giaddr, tc.ciaddr)
		dst, ok := replyAddr(req, resp, tc.canBroadcast)
		got := ""
		if ok {
			got = dst.String()
		}
		if got != tc.want {
			t.Errorf("%s: destination %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestServeReturnsWhenContextEnds(t *testing.T) {
	f := newFixture(t, loopConfig())
	srv, err := NewServer(f.h, ServerConfig{RelayAddr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	// The socket is closed: the port can be bound again.
	conn, err := net.ListenUDP("udp4", srv.RelayAddr())
	if err != nil {
		t.Fatalf("socket still open after Serve returned: %v", err)
	}
	conn.Close()
}

func TestRelayServerIDDefaultsToTheBoundAddress(t *testing.T) {
	cfg := loopConfig()
	cfg.ServerIP = netip.Addr{}
	f := newFixture(t, cfg)
	server := startRelayServer(t, f)
	giaddr := loopAddr(0, 5)
	offer := exchange(t, listenUDP(t, giaddr, dhcpv4.ServerPort), server, must(dhcpv4.NewDiscovery(hw(6), dhcpv4.WithRelay(giaddr.AsSlice()))))
	if got := addr(offer.ServerIdentifier()); got != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("server identifier %s, want the relay socket's 127.0.0.1", got)
	}
}
