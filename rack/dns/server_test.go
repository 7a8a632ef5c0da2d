package dns

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ironflow/ironflow/region/api"
	regiondns "github.com/ironflow/ironflow/region/dns"
)

// fakeRegion answers from zones built from data, or fails while down.
type fakeRegion struct {
	zones atomic.Pointer[regiondns.Zones]
	down  atomic.Bool
	calls atomic.Int64
}

func (r *fakeRegion) Exchange(_ context.Context, q *mdns.Msg, _ uint32) (*mdns.Msg, error) {
	r.calls.Add(1)
	if r.down.Load() {
		return nil, errors.New("region unreachable")
	}
	return r.zones.Load().Answer(q), nil
}

func (r *fakeRegion) set(serial uint32, addr string) {
	r.zones.Store(regiondns.Build(regiondns.Data{
		Serial:  serial,
		Domains: []api.Domain{{Name: "a.example", Default: true, TTL: 60}},
		Hosts:   []regiondns.Host{{Name: "birdy", Addr: netip.MustParseAddr(addr)}},
		Subnets: []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16")},
	}))
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

var (
	inside  = netip.MustParseAddr("10.5.0.99")
	outside = netip.MustParseAddr("192.0.2.99")
)

func newTestServer(t testing.TB, size int) (*Server, *fakeRegion, *prometheus.Registry) {
	t.Helper()
	r := &fakeRegion{}
	r.set(1, "10.5.0.7")
	reg := prometheus.NewRegistry()
	s, err := New(Config{Region: r, CacheSize: size, MaxStale: time.Hour, Registry: reg, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	s.Configure(Settings{Zones: []string{"a.example.", "5.10.in-addr.arpa."}, Serial: 1, Served: []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16")}})
	return s, r, reg
}

func query(s *Server, name string, qtype uint16, src netip.Addr) *mdns.Msg {
	return s.Handle(context.Background(), new(mdns.Msg).SetQuestion(name, qtype), src, false)
}

func firstA(t *testing.T, m *mdns.Msg) string {
	t.Helper()
	if m.Rcode != mdns.RcodeSuccess || len(m.Answer) == 0 {
		t.Fatalf("answer %v", m)
	}
	return m.Answer[len(m.Answer)-1].(*mdns.A).A.String()
}

// TestRegionAnswersCachedUntilTheSerialChanges: a region name is asked once, then answered
// from the cache until the region's serial moves.
func TestRegionAnswersCachedUntilTheSerialChanges(t *testing.T) {
	s, r, _ := newTestServer(t, 100)
	if in := query(s, "birdy.a.example.", mdns.TypeA, inside); firstA(t, in) != "10.5.0.7" || !in.RecursionAvailable {
		t.Fatalf("to a served client: %v", in)
	}
	if in := query(s, "BIRDY.a.example.", mdns.TypeA, inside); firstA(t, in) != "10.5.0.7" {
		t.Fatalf("again: %v", in)
	}
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("region asked %d times, want 1 (second answer from the cache)", n)
	}
	r.set(2, "10.5.0.8")
	if got := firstA(t, query(s, "birdy.a.example.", mdns.TypeA, inside)); got != "10.5.0.7" {
		t.Fatalf("before the rack learns the new serial: %s, want the cached 10.5.0.7", got)
	}
	s.Configure(Settings{Zones: []string{"a.example.", "5.10.in-addr.arpa."}, Serial: 2, Served: []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16")}})
	if got := firstA(t, query(s, "birdy.a.example.", mdns.TypeA, inside)); got != "10.5.0.8" {
		t.Fatalf("after the serial moved: %s, want 10.5.0.8", got)
	}
	ptr := query(s, "7.0.5.10.in-addr.arpa.", mdns.TypePTR, inside)
	if len(ptr.Answer) != 0 || ptr.Rcode != mdns.RcodeNameError {
		t.Fatalf("the old address's PTR after the move: %v", ptr)
	}
}

// TestStaleWhileEveryRegionIsDown: with the region down an expired answer is served stale
// (TTL 30) for MaxStale past its expiry, then SERVFAIL.
func TestStaleWhileEveryRegionIsDown(t *testing.T) {
	s, r, reg := newTestServer(t, 100)
	start := time.Now()
	s.now = func() time.Time { return start }
	firstA(t, query(s, "birdy.a.example.", mdns.TypeA, inside))
	r.down.Store(true)
	s.now = func() time.Time { return start.Add(61 * time.Second) } // past the 60 s TTL
	m := query(s, "birdy.a.example.", mdns.TypeA, inside)
	if firstA(t, m) != "10.5.0.7" || m.Answer[0].Header().Ttl != staleTTL {
		t.Fatalf("stale answer %v", m)
	}
	if n := testutil.ToFloat64(s.metrics.answers.WithLabelValues(fromStale)); n != 1 {
		t.Fatalf("stale answers counted %v", n)
	}
	s.now = func() time.Time { return start.Add(61*time.Second + time.Hour) }
	if m := query(s, "birdy.a.example.", mdns.TypeA, inside); m.Rcode != mdns.RcodeServerFailure {
		t.Fatalf("past MaxStale: %v, want SERVFAIL", m)
	}
	if n, err := testutil.GatherAndCount(reg, "ironflow_dns_servfail_total"); err != nil || n != 1 {
		t.Fatalf("servfail metric: %d %v", n, err)
	}
}

// TestRefusals: each bad query gets its clear refusal and is counted by reason.
func TestRefusals(t *testing.T) {
	s, _, _ := newTestServer(t, 100)
	big := new(mdns.Msg).SetQuestion("birdy.a.example.", mdns.TypeA)
	big.SetEdns0(4096, false)
	big.IsEdns0().Option = append(big.IsEdns0().Option, &mdns.EDNS0_PADDING{Padding: make([]byte, 1500)})
	notify := new(mdns.Msg).SetQuestion("a.example.", mdns.TypeSOA)
	notify.Opcode = mdns.OpcodeNotify
	chaos := new(mdns.Msg).SetQuestion("version.bind.", mdns.TypeTXT)
	chaos.Question[0].Qclass = mdns.ClassCHAOS
	cases := []struct {
		what   string
		req    *mdns.Msg
		src    netip.Addr
		tcp    bool
		rcode  int
		reason string
	}{
		{"recursion from outside", new(mdns.Msg).SetQuestion("example.com.", mdns.TypeA), outside, false, mdns.RcodeRefused, refusedNotServed},
		{"a region name from outside", new(mdns.Msg).SetQuestion("birdy.a.example.", mdns.TypeA), outside, false, mdns.RcodeRefused, refusedNotServed},
		{"AXFR from outside", new(mdns.Msg).SetQuestion("a.example.", mdns.TypeAXFR), outside, true, mdns.RcodeRefused, refusedNotServed},
		{"AXFR over UDP", new(mdns.Msg).SetQuestion("a.example.", mdns.TypeAXFR), inside, false, mdns.RcodeRefused, refusedTransfer},
		{"AXFR of a zone not the region's", new(mdns.Msg).SetQuestion("example.com.", mdns.TypeAXFR), inside, true, mdns.RcodeRefused, refusedTransfer},
		{"no upstream", new(mdns.Msg).SetQuestion("example.com.", mdns.TypeA), inside, false, mdns.RcodeRefused, refusedNoUpstream},
		{"invalid label", new(mdns.Msg).SetQuestion(`bad\032label.a.example.`, mdns.TypeA), inside, false, mdns.RcodeFormatError, formerrBadName},
		{"oversized", big, inside, false, mdns.RcodeFormatError, formerrOversized},
		{"NOTIFY", notify, inside, false, mdns.RcodeNotImplemented, refusedOpcode},
		{"class CHAOS", chaos, inside, false, mdns.RcodeRefused, refusedClass},
	}
	for _, c := range cases {
		before := testutil.ToFloat64(s.metrics.refused.WithLabelValues(c.reason))
		m := s.Handle(context.Background(), c.req, c.src, c.tcp)
		if m.Rcode != c.rcode || len(m.Answer) != 0 {
			t.Errorf("%s: %s with %d answers, want %s", c.what, mdns.RcodeToString[m.Rcode], len(m.Answer), mdns.RcodeToString[c.rcode])
		}
		if after := testutil.ToFloat64(s.metrics.refused.WithLabelValues(c.reason)); after != before+1 {
			t.Errorf("%s: reason %s counted %v -> %v", c.what, c.reason, before, after)
		}
	}
	axfr := s.Handle(context.Background(), new(mdns.Msg).SetQuestion("a.example.", mdns.TypeAXFR), inside, true)
	if axfr.Rcode != mdns.RcodeSuccess || len(axfr.Answer) < 3 {
		t.Fatalf("AXFR over TCP from a served subnet: %v", axfr)
	}
}

// TestCacheIsBounded: the cache keeps CacheSize answers, dropping the least recently used.
func TestCacheIsBounded(t *testing.T) {
	s, r, _ := newTestServer(t, 2)
	for _, name := range []string{"birdy.a.example.", "x.a.example.", "y.a.example."} {
		query(s, name, mdns.TypeA, inside)
	}
	if n := s.cache.len(); n != 2 {
		t.Fatalf("cache holds %d answers, want 2", n)
	}
	calls := r.calls.Load()
	query(s, "birdy.a.example.", mdns.TypeA, inside) // evicted: asked again
	if r.calls.Load() != calls+1 {
		t.Fatal("the least recently used answer was not evicted")
	}
}

// upstreamServer is a resolver on loopback answering every A query with 192.0.2.1.
func upstreamServer(t testing.TB) (netip.AddrPort, *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	h := mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		calls.Add(1)
		m := new(mdns.Msg).SetReply(req)
		m.RecursionAvailable = true
		m.Answer = []mdns.RR{&mdns.A{Hdr: mdns.RR_Header{Name: req.Question[0].Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 1)}}
		_ = w.WriteMsg(m)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- regiondns.Serve(ctx, h, pc, ln, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return netip.MustParseAddrPort(pc.LocalAddr().String()), &calls
}

// TestUpstreamForwardedAndCached: names outside the region's zones go to the upstream once,
// then come from the cache.
func TestUpstreamForwardedAndCached(t *testing.T) {
	s, _, _ := newTestServer(t, 100)
	up, calls := upstreamServer(t)
	s.Configure(Settings{Zones: []string{"a.example."}, Upstreams: []netip.AddrPort{up}, Served: []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16")}})
	for range 2 {
		if got := firstA(t, query(s, "www.example.com.", mdns.TypeA, inside)); got != "192.0.2.1" {
			t.Fatalf("A %s", got)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("upstream asked %d times, want 1", n)
	}
}

// TestCachedAnswersStayWithTheirRegion: a rack transfer moves the rack to another region.
// That region's serial may equal the old one's (each region counts its own), and its zones
// may leave out a domain of the old one: neither the old region's answers of a zone the new
// one serves too, nor those of a name now outside the zones, come from the cache.
func TestCachedAnswersStayWithTheirRegion(t *testing.T) {
	s, r, _ := newTestServer(t, 100)
	up, upCalls := upstreamServer(t)
	served := []netip.Prefix{netip.MustParsePrefix("10.5.0.0/16")}
	s.Configure(Settings{Zones: []string{"a.example.", "5.10.in-addr.arpa."}, Serial: 1, Region: "region-a", Served: served})
	if got := firstA(t, query(s, "birdy.a.example.", mdns.TypeA, inside)); got != "10.5.0.7" {
		t.Fatalf("from region A: %s", got)
	}
	// Region B, at the same serial, serves the same zones with other data.
	r.set(1, "10.5.0.8")
	s.Configure(Settings{Zones: []string{"a.example.", "5.10.in-addr.arpa."}, Serial: 1, Region: "region-b", Upstreams: []netip.AddrPort{up}, Served: served})
	if got := firstA(t, query(s, "birdy.a.example.", mdns.TypeA, inside)); got != "10.5.0.8" {
		t.Fatalf("after the move to region B at the same serial: %s, want B's 10.5.0.8", got)
	}
	// Region C serves no a.example: the name goes to the upstream, not to B's cached answer.
	s.Configure(Settings{Zones: []string{"5.10.in-addr.arpa."}, Serial: 9, Region: "region-c", Upstreams: []netip.AddrPort{up}, Served: served})
	if got := firstA(t, query(s, "birdy.a.example.", mdns.TypeA, inside)); got != "192.0.2.1" || upCalls.Load() != 1 {
		t.Fatalf("a name outside region C's zones: %s (upstream asked %d times), want the upstream's 192.0.2.1", got, upCalls.Load())
	}
}
