package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/internal/dhcptest"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack"
	"github.com/ironflow/ironflow/region/api"
)

// abuseRack is rack A serving on loopback 127.0.0.1: DHCP relayed, TFTP, HTTP (boot,
// enlistment, agent proxy), the HTTP proxy for machines and syslog. Its clients are the addresses of abuseServedNet;
// abuseOutsider is in no subnet of the region. Its DNS is off: a rack answers loopback
// clients as its own, so DNS is checked on abuseLinkRack.
type abuseRack struct {
	o        rack.Options
	httpURL  string
	bootFile []byte // abuseBootFile in the boot dir
}

const abuseBootFile = "abuse.bin"

// abuseHTTPHeaderTimeout is the rack's HTTP boot ReadHeaderTimeout (rack/httpboot, default).
const abuseHTTPHeaderTimeout = 10 * time.Second

func (s *abuseStack) startAbuseRack(t *testing.T) *abuseRack {
	t.Helper()
	r := &abuseRack{o: rack.Options{
		StateDir:            s.rackADir,
		DHCPRelayListen:     testutil.FreeUDPAddr(t),
		ServerIP:            netip.MustParseAddr("127.0.0.1"),
		TFTPListen:          testutil.FreeUDPAddr(t),
		DNSListen:           []string{},
		HTTPListen:          testutil.FreeAddr(t),
		ProxyListen:         []string{testutil.FreeAddr(t)},
		SyslogListen:        testutil.FreeDNSAddr(t),
		BootDir:             t.TempDir(),
		PodRefreshInterval:  -1,
		HeartbeatInterval:   200 * time.Millisecond,
		RegionCheckInterval: 200 * time.Millisecond,
		Version:             "test",
		Logger:              abuseLogger(t),
	}}
	r.httpURL = "http://" + r.o.HTTPListen
	r.bootFile = bytes.Repeat([]byte("ironflow boot file "), 200)
	if err := os.WriteFile(filepath.Join(r.o.BootDir, abuseBootFile), r.bootFile, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rack.Serve(ctx, r.o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("rack: %v", err)
		}
	})
	pollUntil(t, 10*time.Second, "rack A online (its config applied)", func() (bool, error) {
		rk, err := s.admin.Racks().Get(context.Background(), s.rackA.Uuid)
		return err == nil && rk.Status == api.RackOnline, err
	})
	return r
}

// abuseLinkRack is rack B serving broadcast DHCP on an interface of its own network namespace
// (abuseLinkServer) and DNS on that interface's address, joined by a veth pair to a client
// namespace where machine B's MAC has an address of rack B's subnet (abuseLinkClient) and one
// of no subnet (abuseLinkOutsider). Its link to the region runs in the test's namespace.
type abuseLinkRack struct {
	o            rack.Options
	cliNS, cliIf string
}

var (
	abuseLinkServer   = abuseAddr(abuseRackBNet, 1)
	abuseLinkClient   = abuseAddr(abuseRackBNet, 60)
	abuseLinkOutsider = netip.MustParseAddr("10.99.0.9")
)

func (s *abuseStack) startLinkRack(t *testing.T) *abuseLinkRack {
	t.Helper()
	rackNS, rackIf, cliNS, cliIf := netnstest.VethPair(t, "ab")
	r := &abuseLinkRack{cliNS: cliNS, cliIf: cliIf, o: rack.Options{
		StateDir:            s.rackBDir,
		DHCPInterfaces:      []string{rackIf},
		DNSListen:           []string{netip.AddrPortFrom(abuseLinkServer, 53).String()},
		ProxyListen:         []string{}, // rack A's covers the listener
		PodRefreshInterval:  -1,
		HeartbeatInterval:   200 * time.Millisecond,
		RegionCheckInterval: 200 * time.Millisecond,
		Version:             "test",
		Logger:              abuseLogger(t),
	}}
	netnstest.IP(t, "-n", rackNS, "addr", "add", abuseLinkServer.String()+"/24", "dev", rackIf)
	netnstest.IP(t, "-n", rackNS, "route", "add", abuseLinkOutsider.String()+"/32", "dev", rackIf)
	netnstest.IP(t, "-n", cliNS, "link", "set", cliIf, "address", s.machineB.HardwareAddrs[0])
	netnstest.IP(t, "-n", cliNS, "addr", "add", abuseLinkClient.String()+"/24", "dev", cliIf)
	netnstest.IP(t, "-n", cliNS, "addr", "add", abuseLinkOutsider.String()+"/24", "dev", cliIf)
	ctx, cancel := context.WithCancel(context.Background())
	done := netnstest.Start(rackNS, func() error { return rack.Serve(ctx, r.o) })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("rack B: %v", err)
		}
	})
	q := new(mdns.Msg).SetQuestion("machine-b."+abuseDomain, mdns.TypeA)
	pollUntil(t, 10*time.Second, "rack B answers machine B's name on its link", func() (bool, error) {
		m, err := r.ask(t, "udp", abuseLinkClient, q)
		return err == nil && m.Rcode == mdns.RcodeSuccess && len(m.Answer) == 1, err
	})
	return r
}

// dnsServer is the rack's DNS address on its link.
func (r *abuseLinkRack) dnsServer() string { return r.o.DNSListen[0] }

// ask sends q to the rack's DNS from the client namespace's address from.
func (r *abuseLinkRack) ask(t *testing.T, network string, from netip.Addr, q *mdns.Msg) (m *mdns.Msg, err error) {
	t.Helper()
	netnstest.Run(t, r.cliNS, func() error {
		m, err = exchangeFrom(network, from, r.dnsServer(), q)
		return nil
	})
	return m, err
}

// abuseRacks are the two serving racks of the suite.
type abuseRacks struct {
	loopback *abuseRack
	link     *abuseLinkRack
}

// abuseListenerCheck checks one listener of a rack; a nil check names a listener the suite
// does not open, with the reason in abuseListeners' comment.
type abuseListenerCheck func(t *testing.T, s *abuseStack, r abuseRacks, l rack.Listener)

// abuseListeners covers every listener of a rack, by rack.Listener.Name.
var abuseListeners = map[string]abuseListenerCheck{
	// Router advertisements are an empty advertisement multicast on the link (rack/ra):
	// nothing to ask for, nothing routed.
	"router-adv/link": nil,

	"dhcp/link":        abuseBroadcastDHCP,
	"dhcp-relay/udp":   abuseDHCPRelay,
	"tftp/udp":         abuseTFTP,
	"http-boot/tcp":    abuseHTTPBoot,
	"agent-enlist/tcp": abuseAgentEnlist,
	"agent-proxy/tcp":  abuseAgentProxy,
	"dns/udp":          abuseRackDNS,
	"dns/tcp":          abuseRackDNS,
	"syslog/udp":       abuseSyslog,
	"syslog/tcp":       abuseSyslog,
	"proxy/tcp":        abuseProxy,
}

// abuseEveryListener is rack options that open every listener a rack has, for the coverage
// check; nothing is opened.
func abuseEveryListener(r *abuseRack) rack.Options {
	o := r.o
	o.DHCPInterfaces, o.RouterAdvertisements, o.DNSListen, o.ProxyListen = []string{"lo"}, true, nil, nil
	return o
}

func abuseRackListeners(t *testing.T, s *abuseStack) {
	r := abuseRacks{loopback: s.startAbuseRack(t), link: s.startLinkRack(t)}
	t.Run("every listener is covered", func(t *testing.T) {
		all, err := abuseEveryListener(r.loopback).Listeners()
		if err != nil {
			t.Fatal(err)
		}
		opened := map[string]bool{}
		for _, l := range all {
			opened[l.Option] = true
			if _, ok := abuseListeners[l.Name()]; !ok {
				t.Errorf("listener %s is not in the abuse suite: add its check to abuseListeners (integration/abuse_rack_test.go) and its clients to ARCHITECTURE.md's threat model", l)
			}
		}
		for f := range reflect.TypeFor[rack.Options]().Fields() {
			if (strings.HasSuffix(f.Name, "Listen") || strings.HasSuffix(f.Name, "Interfaces")) && !opened[f.Name] {
				t.Errorf("rack option %s opens no listener that rack.Options.Listeners lists: add it there", f.Name)
			}
		}
	})
	listeners, err := r.loopback.o.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	linkListeners, err := r.link.o.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range append(listeners, linkListeners...) {
		check := abuseListeners[l.Name()]
		if check == nil {
			continue
		}
		t.Run(l.Name(), func(t *testing.T) {
			t.Parallel()
			check(t, s, r, l)
		})
	}
}

// abuseClient is an address of rack A's subnet other than machine A's.
func abuseClient() netip.Addr { return abuseAddr(abuseServedNet(), 60) }

// udpReplies sends packet to server from a socket bound to from and returns the bytes of
// every datagram that comes back, from any port, until window has passed without one. A
// non-nil answer is sent back to the sender of each.
func udpReplies(from netip.AddrPort, server string, packet, answer []byte, window time.Duration) (replies [][]byte, err error) {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(from))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	dst, err := net.ResolveUDPAddr("udp4", server)
	if err != nil {
		return nil, err
	}
	if _, err := conn.WriteTo(packet, dst); err != nil {
		return nil, err
	}
	buf := make([]byte, 65536)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(window)); err != nil {
			return nil, err
		}
		n, sender, err := conn.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return replies, nil
		}
		if err != nil {
			return nil, err
		}
		replies = append(replies, slices.Clone(buf[:n]))
		if answer != nil {
			if _, err := conn.WriteTo(answer, sender); err != nil {
				return nil, err
			}
		}
	}
}

// mustReplies is udpReplies in the test's namespace.
func mustReplies(t *testing.T, from netip.AddrPort, server string, packet, answer []byte) [][]byte {
	t.Helper()
	replies, err := udpReplies(from, server, packet, answer, amplificationWindow)
	if err != nil {
		t.Fatal(err)
	}
	return replies
}

// assertNoAmplification fails when an outsider's request drew more bytes than it sent.
func assertNoAmplification(t *testing.T, what string, request []byte, replies [][]byte) {
	t.Helper()
	got := 0
	for _, r := range replies {
		got += len(r)
	}
	if got > len(request) {
		t.Errorf("%s: an outsider's %d bytes drew %d bytes in %d datagrams", what, len(request), got, len(replies))
	}
}

// amplificationWindow is how long an outsider's socket listens for answers after the last.
const amplificationWindow = time.Second

func abuseDHCPRelay(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	mac := mustMAC(t, s.machineA.HardwareAddrs[0])
	relay := dhcptest.NewRelay(t, abuseAddr(abuseServedNet(), 1), l.Addr)
	pollUntil(t, 10*time.Second, "machine A's reservation through the relay", func() (bool, error) {
		got, err := relay.DORA(mac)
		return err == nil && got.String() == s.machineA.Address, err
	})
	t.Run("outsiders get no more bytes than they sent", func(t *testing.T) {
		discover, err := dhcpv4.NewDiscovery(mac)
		if err != nil {
			t.Fatal(err)
		}
		discover.GatewayIPAddr = abuseOutsider().AsSlice()
		request := discover.ToBytes()
		assertNoAmplification(t, "DHCP relayed from outside the served subnets", request,
			mustReplies(t, netip.AddrPortFrom(abuseOutsider(), dhcpv4.ServerPort), l.Addr, request, nil))
	})
}

// tftpRead is a read request of file in octet mode.
func tftpRead(file string) []byte {
	return append(append(append([]byte{0, 1}, file...), 0), "octet\x00"...)
}

// tftpAbort is the error a client answers a transfer with to end it (RFC 1350, code 0), so
// that the server does not retransmit until its timeout.
var tftpAbort = []byte("\x00\x05\x00\x00abuse suite\x00")

func abuseTFTP(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	r := racks.loopback
	request := tftpRead(abuseBootFile)
	replies := mustReplies(t, netip.AddrPortFrom(abuseClient(), 0), l.Addr, request, tftpAbort)
	if len(replies) == 0 || !bytes.Equal(replies[0], append([]byte{0, 3, 0, 1}, r.bootFile[:512]...)) {
		t.Fatalf("a client of the served subnet reading %s: %d replies, first %.40q", abuseBootFile, len(replies), firstOf(replies))
	}
	t.Run("outsiders get no more bytes than they sent", func(t *testing.T) {
		assertNoAmplification(t, "TFTP read from outside the served subnets", request,
			mustReplies(t, netip.AddrPortFrom(abuseOutsider(), 0), l.Addr, request, tftpAbort))
	})
}

func firstOf(replies [][]byte) []byte {
	if len(replies) == 0 {
		return nil
	}
	return replies[0]
}

func abuseHTTPBoot(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	r := racks.loopback
	if a := callAs(t, "", "GET", r.httpURL+"/ipxe/boot.ipxe", nil); a.code != 200 {
		t.Errorf("the boot script: %d %s", a.code, a.body)
	}
	if a := callAs(t, "", "GET", r.httpURL+api.RackImagePath+"nobody", nil); a.code != 404 {
		t.Errorf("an image the region lacks: %d %.100s", a.code, a.body)
	}
	for _, path := range []string{"/boot/..%2f..%2fetc%2fpasswd", "/boot/%2e%2e/rack.json", "/boot//etc/passwd",
		api.RackImagePath + "..%2f..%2fetc%2fpasswd", api.RackImagePath + "%2e%2e", api.RackImagePath + ".hidden"} {
		if a := callAs(t, "", "GET", r.httpURL+path, nil); a.code < 400 || a.code >= 500 {
			t.Errorf("GET %s outside the boot dir: %d %.100s", path, a.code, a.body)
		}
	}
	t.Run("a client that does not finish its headers is cut off", func(t *testing.T) {
		assertCutOff(t, l.Addr, "GET /ipxe/boot.ipxe HTTP/1.1\r\nHost: rack\r\n", abuseHTTPHeaderTimeout)
	})
}

func abuseAgentEnlist(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	r := racks.loopback
	if a := callAs(t, "", "POST", r.httpURL+"/api/v1/enlist", bytes.Repeat([]byte(" "), abuseBodyLimit+1)); a.code != 413 {
		t.Errorf("an enlistment above %d bytes: %d %.100s", abuseBodyLimit, a.code, a.body)
	}
	// The report is the rack's to forward, with its token: the boot facts a running system
	// sends are dropped (only iPXE speaks for the interface it booted from).
	report := api.Enlistment{Boot: &api.BootFacts{MAC: s.machineB.HardwareAddrs[0]},
		Inventory: &api.Inventory{Hostname: "newcomer", Arch: "amd64", Interfaces: []api.NetInterface{{Name: "eth0", MAC: "52:54:00:ce:00:01"}}}}
	a := callAs(t, "", "POST", r.httpURL+"/api/v1/enlist", mustJSON(t, report))
	if a.code != 201 {
		t.Fatalf("a new machine's enlistment through the rack: %d %s", a.code, a.body)
	}
	if b := getMachine(context.Background(), t, s.admin, s.machineB.Uuid); !slices.Equal(b.HardwareAddrs, s.machineB.HardwareAddrs) || b.Enlisted != nil {
		t.Errorf("an enlistment naming machine B's MAC in its boot facts changed machine B: %v, %+v", b.HardwareAddrs, b.Enlisted)
	}
}

func abuseAgentProxy(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	r := racks.loopback
	checkin := r.httpURL + "/api/v1/agent/" + s.machineA.Uuid + "/checkin"
	body := mustJSON(t, api.AgentCheckin{Version: "test", Hostname: "machine-a"})
	for _, c := range []struct {
		who  principal
		want int
	}{{anonymous, 401}, {ownRack, 401}, {otherAgent, 403}, {ownAgent, 200}} {
		if a := callAs(t, s.tokens[c.who], "POST", checkin, body); a.code != c.want {
			t.Errorf("check-in of machine A through the rack as %s: %d, want %d: %s", c.who, a.code, c.want, a.body)
		}
	}
	if a := callAs(t, s.tokens[ownAgent], "POST", checkin, bytes.Repeat([]byte(" "), abuseBodyLimit+1)); a.code != 413 {
		t.Errorf("a check-in above %d bytes through the rack: %d %.100s", abuseBodyLimit, a.code, a.body)
	}
}

func abuseRackDNS(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	r := racks.link
	q := new(mdns.Msg).SetQuestion("machine-b."+abuseDomain, mdns.TypeA)
	if m, err := r.ask(t, l.Network, abuseLinkClient, q); err != nil || m.Rcode != mdns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("a client of the served subnet asking machine B's name: %v, %v", m, err)
	}
	t.Run("rack DNS answers REFUSED outside its served subnets", func(t *testing.T) {
		m, err := r.ask(t, l.Network, abuseLinkOutsider, q)
		if err != nil {
			t.Fatal(err)
		}
		if m.Rcode != mdns.RcodeRefused || len(m.Answer) > 0 {
			t.Errorf("an outsider asking machine B's name: %s with %d answers, want REFUSED", mdns.RcodeToString[m.Rcode], len(m.Answer))
		}
	})
	if l.Network != "udp" {
		return
	}
	t.Run("outsiders get no more bytes than they sent", func(t *testing.T) {
		request, err := new(mdns.Msg).SetQuestion(abuseBigName, mdns.TypeA).Pack()
		if err != nil {
			t.Fatal(err)
		}
		var replies [][]byte
		netnstest.Run(t, r.cliNS, func() (err error) {
			replies, err = udpReplies(netip.AddrPortFrom(abuseLinkOutsider, 0), r.dnsServer(), request, nil, amplificationWindow)
			return err
		})
		assertNoAmplification(t, "DNS from outside the served subnets", request, replies)
	})
}

// abuseBroadcastDHCP: machine B's interface broadcasts on rack B's link and gets its
// reservation, with rack B as the server.
func abuseBroadcastDHCP(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	r := racks.link
	var conn net.PacketConn
	netnstest.Run(t, r.cliNS, func() (err error) {
		conn, err = nclient4.NewRawUDPConn(r.cliIf, dhcpv4.ClientPort)
		return err
	})
	c, err := nclient4.NewWithConn(conn, mustMAC(t, s.machineB.HardwareAddrs[0]), nclient4.WithTimeout(time.Second), nclient4.WithRetry(1))
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	defer c.Close()
	lease, err := c.Request(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.ACK.YourIPAddr.String(); got != s.machineB.Address || lease.ACK.ServerIdentifier().String() != abuseLinkServer.String() {
		t.Errorf("machine B's broadcast: address %s from %s, want its reservation %s from %s", got, lease.ACK.ServerIdentifier(), s.machineB.Address, abuseLinkServer)
	}
}

func abuseSyslog(t *testing.T, s *abuseStack, racks abuseRacks, l rack.Listener) {
	send := func(from netip.Addr, text string) {
		d := net.Dialer{LocalAddr: localAddr(l.Network, from)}
		conn, err := d.Dial(l.Network, l.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := fmt.Fprintf(conn, "<14>abuse: %s\n", text); err != nil {
			t.Fatal(err)
		}
	}
	outsider, insider := "outsider over "+l.Network, "machine a over "+l.Network
	send(abuseOutsider(), outsider)
	var texts []string
	pollUntil(t, 30*time.Second, "machine A's message stored", func() (bool, error) {
		// Sent again until stored: a message that arrives before the rack has applied the
		// config naming machine A is unattributed and dropped, as it should be.
		send(netip.MustParseAddr(s.machineA.Address), insider)
		ms, err := s.admin.MachineLogs(context.Background(), s.machineA.Uuid, url.Values{})
		texts = texts[:0]
		for _, m := range ms {
			texts = append(texts, m.Text)
		}
		return slices.Contains(texts, "abuse: "+insider) || slices.Contains(texts, insider), err
	})
	for _, text := range texts {
		if strings.Contains(text, outsider) {
			t.Errorf("an outsider's syslog was stored under machine A: %q", text)
		}
	}
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	mac, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return mac
}
