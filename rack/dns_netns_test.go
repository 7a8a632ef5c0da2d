package rack

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/region/server"
)

// dnsClient asks the rack's DNS server from the client's namespace, from the address the
// client leased; with no namespace, from the test's own (loopback).
type dnsClient struct {
	ns     string // "" for the test's namespace
	server string // rack address:53
}

func (c dnsClient) ask(t *testing.T, network, name string, qtype uint16) *mdns.Msg {
	t.Helper()
	var m *mdns.Msg
	exchange := func() (err error) {
		cl := &mdns.Client{Net: network, Timeout: 2 * time.Second}
		m, _, err = cl.Exchange(new(mdns.Msg).SetQuestion(name, qtype), c.server)
		return err
	}
	if c.ns == "" {
		if err := exchange(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	netnstest.Run(t, c.ns, exchange)
	return m
}

// answers is the data of m's answer records (addresses, PTR targets), "" for none.
func answerData(m *mdns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *mdns.A:
			out = append(out, rr.A.String())
		case *mdns.PTR:
			out = append(out, rr.Ptr)
		}
	}
	return out
}

func answered(m *mdns.Msg, want string) bool {
	d := answerData(m)
	return m.Rcode == mdns.RcodeSuccess && len(d) == 1 && d[0] == want
}

// leasedDNSClient starts the rack with DNS on its interface (the default: port 53 on the
// DHCP interface's address) and has the client lease its reserved address, checking that
// DHCP points it at the rack (option 6) with the region's domain (option 15); the client's
// interface then gets the address.
func leasedDNSClient(t *testing.T, v *vethRack, addr, domain string) dnsClient {
	t.Helper()
	v.start(t)
	v.lease(t, v.mac, "a lease naming the rack as DNS server and the domain", func(ack *dhcpv4.DHCPv4) bool {
		dns := ack.DNS()
		return ackAddr(ack.YourIPAddr) == netip.MustParseAddr(addr) && len(dns) == 1 && ackAddr(dns[0]) == v.serverIP &&
			ack.DomainName() == domain
	})
	netnstest.IP(t, "-n", v.cliNS, "addr", "add", addr+"/24", "dev", v.cliIf)
	return dnsClient{ns: v.cliNS, server: net.JoinHostPort(v.serverIP.String(), "53")}
}

// TestDNSThroughTheRackOverVeth: a client with a lease from the rack resolves its machine's
// name and reverse address through the rack over UDP and TCP, an operator record created on
// the region is answered within the config poll interval, and with every region stopped the
// rack keeps answering from its cache.
func TestDNSThroughTheRackOverVeth(t *testing.T) {
	v := newVethRack(t)
	ctx := context.Background()
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	v.machine(t, "veth-machine", v.mac, "10.77.0.50")
	if _, err := v.admin.Domains().Create(ctx, api.Domain{Name: "a.example", Default: true, TTL: 300}); err != nil {
		t.Fatal(err)
	}
	c := leasedDNSClient(t, v, "10.77.0.50", "a.example")

	for _, network := range []string{"udp", "tcp"} {
		if m := c.ask(t, network, "veth-machine.a.example.", mdns.TypeA); !answered(m, "10.77.0.50") {
			t.Fatalf("%s: A of veth-machine.a.example: %v", network, m)
		}
		if m := c.ask(t, network, "50.0.77.10.in-addr.arpa.", mdns.TypePTR); !answered(m, "veth-machine.a.example.") {
			t.Fatalf("%s: PTR of 10.77.0.50: %v", network, m)
		}
	}

	// The rack caches the NXDOMAIN for 300 s; the region's serial, which moves with the new
	// record, reaches it with the config (polled every 200 ms here).
	if m := c.ask(t, "udp", "svc.a.example.", mdns.TypeA); m.Rcode != mdns.RcodeNameError {
		t.Fatalf("svc.a.example before the record: %v", m)
	}
	if _, err := v.admin.DNSRecords().Create(ctx, api.DNSRecord{Domain: "a.example", Name: "svc", Type: "A", Data: "10.77.0.9"}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	testutil.Eventually(t, 5*time.Second, "the rack answers the new record", func() bool {
		return answered(c.ask(t, "udp", "svc.a.example.", mdns.TypeA), "10.77.0.9")
	})
	if d := time.Since(created); d > 2*time.Second {
		t.Fatalf("the record took %s to reach the rack; the config is polled every 200 ms", d)
	}

	// Short TTLs, so that answers expire while the region is down and are served stale.
	if _, err := v.admin.Domains().Patch(ctx, "a.example", []byte(`{"TTL": 1}`)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "an answer with the new TTL", func() bool {
		m := c.ask(t, "udp", "veth-machine.a.example.", mdns.TypeA)
		return answered(m, "10.77.0.50") && m.Answer[0].Header().Ttl <= 1
	})
	v.region.stop()
	testutil.Eventually(t, 10*time.Second, "a stale answer (TTL 30) with the region stopped", func() bool {
		m := c.ask(t, "udp", "veth-machine.a.example.", mdns.TypeA)
		return answered(m, "10.77.0.50") && m.Answer[0].Header().Ttl == 30
	})
	if m := c.ask(t, "tcp", "veth-machine.a.example.", mdns.TypeA); !answered(m, "10.77.0.50") {
		t.Fatalf("TCP with the region stopped: %v", m)
	}
}

// TestDNSFollowsAMigrationOverVeth: after the machine migrates to region B, region A's zone
// no longer has it and the client resolves its new name in B's domain through the rack,
// which forwards it to A's upstream: B's DNS server. (B's TTL of 1 s bounds how long the
// rack caches B's NXDOMAIN from before the move.)
func TestDNSFollowsAMigrationOverVeth(t *testing.T) {
	dnsB := testutil.FreeDNSAddr(t)
	b := startRegionWith(t, pgtest.NewDatabase(t), "region-b", func(c *server.Config) { c.DNSListen = dnsB })
	adminB := b.admin()
	ctx := context.Background()
	if _, err := adminB.Domains().Create(ctx, api.Domain{Name: "b.example", Default: true, TTL: 1}); err != nil {
		t.Fatal(err)
	}

	v := newVethRack(t)
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	v.machine(t, "veth-machine", v.mac, "10.77.0.50")
	if _, err := v.admin.Domains().Create(ctx, api.Domain{Name: "a.example", Default: true, Upstreams: []string{dnsB}}); err != nil {
		t.Fatal(err)
	}
	c := leasedDNSClient(t, v, "10.77.0.50", "a.example")
	if m := c.ask(t, "udp", "veth-machine.a.example.", mdns.TypeA); !answered(m, "10.77.0.50") {
		t.Fatalf("before the migration: %v", m)
	}
	if m := c.ask(t, "udp", "veth-machine.b.example.", mdns.TypeA); m.Rcode != mdns.RcodeNameError {
		t.Fatalf("the new name before the migration: %v", m)
	}

	migrate(t, v.admin, adminB, "Name:veth-machine", b.URL)

	testutil.Eventually(t, 5*time.Second, "the new name through the rack", func() bool {
		return answered(c.ask(t, "udp", "veth-machine.b.example.", mdns.TypeA), "10.77.0.50")
	})
	testutil.Eventually(t, 5*time.Second, "the old name gone from region A's zone", func() bool {
		return c.ask(t, "tcp", "veth-machine.a.example.", mdns.TypeA).Rcode == mdns.RcodeNameError
	})
}

// migrate moves the machine at key from one region to another with the steps of
// MigrateMachine (region/api/migration.go), called directly.
func migrate(t *testing.T, from, to *client.Client, key, toURL string) {
	t.Helper()
	ctx := context.Background()
	const id = "migrate-machine/dns-test"
	ticket, err := to.MintTicket(ctx, api.TicketRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := from.Quiesce(ctx, key, api.QuiesceRequest{Migration: id}); err != nil {
		t.Fatal(err)
	}
	bundle, err := from.Export(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	m, err := to.Import(ctx, api.ImportRequest{Ticket: ticket.Token, Bundle: bundle, Migration: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := from.FinalizeMigration(ctx, key, api.FinalizeRequest{RedirectEndpoint: toURL}); err != nil {
		t.Fatal(err)
	}
	if _, err := to.Activate(ctx, m.Uuid); err != nil {
		t.Fatal(err)
	}
}
