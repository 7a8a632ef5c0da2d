package dns

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
)

// staticSource is region data that never changes.
type staticSource regiondns.Data

func (s staticSource) DNSData(context.Context) (regiondns.Data, error) { return regiondns.Data(s), nil }

// httpRegion posts to a region's DNS-over-HTTP endpoint at base (what the region link does,
// without failover).
type httpRegion struct {
	base *url.URL
	c    *http.Client
}

func (r httpRegion) Do(req *http.Request) (*http.Response, error) {
	req.URL = r.base.ResolveReference(req.URL)
	return r.c.Do(req)
}

// benchRack runs a rack DNS server on 127.0.0.1 whose region is a real region DNS handler
// over HTTP and whose upstream is a resolver on loopback; it returns the server's address.
func benchRack(b *testing.B) string {
	b.Helper()
	data := regiondns.Data{Serial: 1,
		Domains: []api.Domain{{Name: "a.example", Default: true, TTL: 300}},
		Hosts:   []regiondns.Host{{Name: "birdy", Addr: netip.MustParseAddr("10.5.0.7")}},
		Subnets: []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16")}}
	region := httptest.NewServer(regiondns.NewServer(staticSource(data), time.Hour, quietLog))
	b.Cleanup(region.Close)
	base, _ := url.Parse(region.URL)
	region.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = RegionConns // as the rack's
	up, _ := upstreamServer(b)
	// The benchmark's clients share one address and are more than DefaultMaxInFlight with
	// GOMAXPROCS above 1: neither their budget nor the bound is what is measured.
	s, err := New(Config{Region: Region{Link: httpRegion{base: base, c: region.Client()}}, RatePerClient: 1e9, BurstPerClient: 1e9, MaxInFlight: 1024, Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	s.Configure(Settings{Zones: []string{"a.example.", "5.10.in-addr.arpa."}, Upstreams: []netip.AddrPort{up}, Serial: 1})
	return serveLoopback(b, s)
}

// BenchmarkRackDNS measures queries/s of the rack's DNS server over UDP on loopback, 64
// clients at once in the test process: answers from the cache, and misses forwarded to the
// region (over HTTP) and to an upstream resolver (over UDP). The CPU time per query counts
// everything in the process: clients, rack server, region handler and upstream.
func BenchmarkRackDNS(b *testing.B) {
	addr := benchRack(b)
	var unique atomic.Int64
	for _, c := range []struct {
		name string
		q    func() string
	}{
		{"cache-hit", func() string { return "birdy.a.example." }},
		{"forwarded-region", func() string { return fmt.Sprintf("h%d.a.example.", unique.Add(1)) }},
		{"forwarded-upstream", func() string { return fmt.Sprintf("h%d.example.com.", unique.Add(1)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(64)
			cpu := testutil.CPUTime(b)
			b.RunParallel(func(pb *testing.PB) {
				conn, err := net.Dial("udp", addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				co := &mdns.Conn{Conn: conn}
				for pb.Next() {
					if err := ask(co, c.q()); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
			b.ReportMetric(float64((testutil.CPUTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/query")
		})
	}
}

func ask(co *mdns.Conn, name string) error {
	co.SetDeadline(time.Now().Add(5 * time.Second))
	q := new(mdns.Msg).SetQuestion(name, mdns.TypeA)
	if err := co.WriteMsg(q); err != nil {
		return err
	}
	m, err := co.ReadMsg()
	if err != nil {
		return err
	}
	if m.Id != q.Id || m.Rcode == mdns.RcodeServerFailure || m.Rcode == mdns.RcodeRefused {
		return fmt.Errorf("%s: %s", name, mdns.RcodeToString[m.Rcode])
	}
	return nil
}
