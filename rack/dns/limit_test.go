package dns

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ironflow/ironflow/internal/netnstest"
	itestutil "github.com/ironflow/ironflow/internal/testutil"
)

// serveOn runs s on pc and ln until the test ends.
func serveOn(t testing.TB, s *Server, pc net.PacketConn, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, pc, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// serveLoopback runs s on a loopback port free for UDP and TCP and returns its address.
func serveLoopback(t testing.TB, s *Server) string {
	t.Helper()
	addr := itestutil.FreeDNSAddr(t)
	pc, ln, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, s, pc, ln)
	return addr
}

// exchange asks server from local (nil: any address) over network, with one attempt.
func exchange(network string, local net.Addr, server, name string, qtype uint16, edns uint16) (*mdns.Msg, error) {
	q := new(mdns.Msg).SetQuestion(name, qtype)
	if edns > 0 {
		q.SetEdns0(edns, false)
	}
	c := &mdns.Client{Net: network, Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: 2 * time.Second}}
	m, _, err := c.Exchange(q, server)
	return m, err
}

// TestOutsidersAreRefusedEveryName: in a namespace of its own, the rack's DNS server answers
// a client of a served subnet and refuses an address outside every served subnet for a name
// of the region's zones too (TXT with EDNS 4096, what an amplifier is asked), with a reply no
// larger than the query.
func TestOutsidersAreRefusedEveryName(t *testing.T) {
	ns := netnstest.Namespace(t, "dns")
	netnstest.IP(t, "-n", ns, "link", "set", "lo", "up")
	for _, a := range []string{"10.99.0.1/32", "10.99.0.2/32", "10.5.0.2/32"} {
		netnstest.IP(t, "-n", ns, "addr", "add", a, "dev", "lo")
	}
	s, _, _ := newTestServer(t, 100)
	var pc net.PacketConn
	var ln net.Listener
	netnstest.Run(t, ns, func() (err error) {
		pc, ln, err = Listen("10.99.0.1:53")
		return err
	})
	serveOn(t, s, pc, ln)
	ask := func(network, from string) *mdns.Msg {
		var m *mdns.Msg
		netnstest.Run(t, ns, func() (err error) {
			local := net.Addr(&net.UDPAddr{IP: net.ParseIP(from)})
			if network == "tcp" {
				local = &net.TCPAddr{IP: net.ParseIP(from)}
			}
			m, err = exchange(network, local, "10.99.0.1:53", "birdy.a.example.", mdns.TypeTXT, 4096)
			return err
		})
		return m
	}
	for _, network := range []string{"udp", "tcp"} {
		if m := ask(network, "10.5.0.2"); m.Rcode != mdns.RcodeSuccess || len(m.Ns) != 1 {
			t.Fatalf("%s: a served client's query: %v", network, m)
		}
		m := ask(network, "10.99.0.2")
		if m.Rcode != mdns.RcodeRefused || len(m.Answer)+len(m.Ns)+len(m.Extra) > 1 {
			t.Fatalf("%s: an outsider's query of a region name: %v", network, m)
		}
	}
}

// TestQueriesOverTheClientsBudgetAreDropped: a client's queries past its burst go
// unanswered over UDP and end its TCP connection, and are counted; another client (another
// loopback address) still has its own budget.
func TestQueriesOverTheClientsBudgetAreDropped(t *testing.T) {
	r := &fakeRegion{}
	r.set(1, "10.5.0.7")
	s, err := New(Config{Region: r, RatePerClient: 1e-9, BurstPerClient: 2, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	s.Configure(Settings{Zones: []string{"a.example."}, Serial: 1})
	addr := serveLoopback(t, s)
	first := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	for i := range 2 {
		if m, err := exchange("udp", first, addr, "birdy.a.example.", mdns.TypeA, 0); err != nil || m.Rcode != mdns.RcodeSuccess {
			t.Fatalf("query %d within the burst: %v %v", i+1, m, err)
		}
	}
	if m, err := exchange("udp", first, addr, "birdy.a.example.", mdns.TypeA, 0); err == nil {
		t.Fatalf("a query over the budget answered: %v", m)
	}
	if m, err := exchange("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, addr, "birdy.a.example.", mdns.TypeA, 0); err == nil {
		t.Fatalf("a TCP query over the budget answered: %v", m)
	}
	if n := testutil.ToFloat64(s.metrics.rateLimited); n != 2 {
		t.Fatalf("rate-limited queries counted %v, want 2", n)
	}
	if m, err := exchange("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}, addr, "birdy.a.example.", mdns.TypeA, 0); err != nil || m.Rcode != mdns.RcodeSuccess {
		t.Fatalf("another client: %v %v", m, err)
	}
}

// TestClientTableIsBounded: the table keeps at most max buckets; while it is full, clients
// without one share a budget, which the outsiders' own does not draw on; buckets idle long
// enough to have refilled make room.
func TestClientTableIsBounded(t *testing.T) {
	l := newClientLimits(1, 1, 2)
	now := time.Now()
	a, b, c, d := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("10.0.0.4")
	for _, x := range []netip.Addr{a, b} {
		if !l.allow(x, now) {
			t.Fatalf("%s's first query refused", x)
		}
	}
	if !l.allowOutsider(now) || l.allowOutsider(now) {
		t.Fatal("the outsiders' budget of 1 allowed twice, or not once")
	}
	if !l.allow(c, now) || l.allow(d, now) {
		t.Fatal("the clients without a bucket do not share one budget")
	}
	if n := l.len(); n != 2 {
		t.Fatalf("%d buckets, want 2", n)
	}
	later := now.Add(l.idle + time.Second)
	if !l.allow(c, later) || !l.allow(d, later) || l.len() != 2 {
		t.Fatalf("after the idle buckets' sweep: %d buckets", l.len())
	}
}

// blockingRegion answers only when released.
type blockingRegion struct {
	fakeRegion
	release chan struct{}
}

func (r *blockingRegion) Exchange(ctx context.Context, q *mdns.Msg, serial uint32) (*mdns.Msg, error) {
	r.calls.Add(1)
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.zones.Load().Answer(q), nil
}

// TestLookupsInFlightAreBounded: with MaxInFlight lookups at a region that does not answer,
// one more query that would need the region is answered SERVFAIL at once rather than held,
// and counted; the held ones are answered once the region answers.
func TestLookupsInFlightAreBounded(t *testing.T) {
	r := &blockingRegion{release: make(chan struct{})}
	r.set(1, "10.5.0.7")
	s, err := New(Config{Region: r, MaxInFlight: 2, Timeout: time.Minute, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	s.Configure(Settings{Zones: []string{"a.example."}, Serial: 1})
	addr := serveLoopback(t, s)
	var wg sync.WaitGroup
	held := make([]*mdns.Msg, 2)
	for i, name := range []string{"x.a.example.", "y.a.example."} {
		wg.Go(func() {
			q := new(mdns.Msg).SetQuestion(name, mdns.TypeA)
			held[i], _, _ = (&mdns.Client{Timeout: time.Minute}).Exchange(q, addr)
		})
	}
	itestutil.Eventually(t, 10*time.Second, "two lookups at the region", func() bool { return r.calls.Load() == 2 })
	m, err := exchange("udp", nil, addr, "birdy.a.example.", mdns.TypeA, 0)
	if err != nil || m.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("a third lookup: %v %v, want SERVFAIL at once", m, err)
	}
	if n := testutil.ToFloat64(s.metrics.busy); n != 1 {
		t.Fatalf("busy counted %v, want 1", n)
	}
	close(r.release)
	wg.Wait()
	for i, m := range held {
		if m == nil || m.Rcode != mdns.RcodeNameError {
			t.Fatalf("held query %d: %v, want NXDOMAIN", i, m)
		}
	}
}
