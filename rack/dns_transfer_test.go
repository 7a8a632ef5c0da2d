package rack

import (
	"context"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	rackacts "github.com/ironflow/ironflow/activities/rack"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
)

// TestDNSFollowsARackTransfer: the rack answers its machine's name from region A's zone; once
// a transfer repoints it to region B (the rack-local step of transfer-rack, with the
// machine already on B), it answers the name from B's zone, and A's name, now outside the
// rack's zones, goes to B's upstream instead of coming from the cache A's answer left,
// whatever its TTL.
func TestDNSFollowsARackTransfer(t *testing.T) {
	dnsB := testutil.FreeDNSAddr(t)
	m := newMovingRack(t, func(c *server.Config) { c.DNSListen = dnsB })
	ctx := context.Background()
	if _, err := m.src.admin().Domains().Create(ctx, api.Domain{Name: "a.example", Default: true, TTL: 300}); err != nil {
		t.Fatal(err)
	}
	// B's upstream is B's own DNS server: authoritative for B's zones, it refuses A's.
	if _, err := m.dst.admin().Domains().Create(ctx, api.Domain{Name: "b.example", Default: true, TTL: 300, Upstreams: []string{dnsB}}); err != nil {
		t.Fatal(err)
	}
	o := rackOptions(t, m.dir)
	o.DNSListen = []string{testutil.FreeDNSAddr(t)}
	rk := startRack(t, o)
	c := dnsClient{server: o.DNSListen[0]}
	want := m.reserved.String()
	testutil.Eventually(t, 10*time.Second, "birdy.a.example from region A", func() bool {
		return answered(c.ask(t, "udp", "birdy.a.example.", mdns.TypeA), want)
	})

	acts := rackacts.New(rk.p.ctrl, map[string]string{"region-b": testSecret}, rackacts.Pods{})
	if _, err := acts.SwapRegionEndpoints(ctx, rackacts.SwapRegionEndpointsInput{URLs: []string{m.dst.URL}, Secret: "region-b"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "birdy.b.example from region B", func() bool {
		return answered(c.ask(t, "udp", "birdy.b.example.", mdns.TypeA), want)
	})
	for _, network := range []string{"udp", "tcp"} {
		if m := c.ask(t, network, "birdy.a.example.", mdns.TypeA); len(answerData(m)) != 0 {
			t.Errorf("%s: region A's name after the transfer: %v; want B's upstream's refusal, not A's cached answer", network, m)
		}
	}
}
