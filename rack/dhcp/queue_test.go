package dhcp

import (
	"github.com/ironflow/ironflow/internal/testutil"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
)

func TestQueueDropsTheOldestWhenFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	const capacity, extra = 4, 3
	q := newQueue(capacity, m.queueDepth, m.queueFull)
	for i := range capacity + extra {
		q.push(datagram{data: []byte{byte(i)}})
	}
	if got := metricValue(t, reg, "ironflow_dhcp_queue_depth", ""); got != capacity {
		t.Errorf("depth %v, want %d", got, capacity)
	}
	if got := metricValue(t, reg, "ironflow_dhcp_dropped_total", "queue_full"); got != extra {
		t.Errorf("queue_full drops %v, want %d", got, extra)
	}
	var got []byte
	for range capacity {
		d, ok := q.pop()
		if !ok {
			t.Fatal("queue closed")
		}
		got = append(got, d.data[0])
	}
	if want := []byte{3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want the newest %v in order", got, want)
	}
	q.close()
	if _, ok := q.pop(); ok {
		t.Fatal("pop after close returned a datagram")
	}
}

// gatedLeases blocks every Offer until gate is closed, so the server's workers stay busy.
type gatedLeases struct {
	Leases
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedLeases) Offer(subnet string, mac net.HardwareAddr, requested netip.Addr) (netip.Addr, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.gate
	return g.Leases.Offer(subnet, mac, requested)
}

// TestServerAnswersTheNewestWhenOverloaded: with its only worker blocked, the server
// receives more requests than its queue holds; it drops the oldest (counted) and, once the
// worker is free, answers the request it was handling and the newest ones.
func TestServerAnswersTheNewestWhenOverloaded(t *testing.T) {
	f := newFixture(t, loopConfig())
	gated := &gatedLeases{Leases: f.table, entered: make(chan struct{}, 1), gate: make(chan struct{})}
	h, err := NewHandler(loopConfig(), gated, f.h.metrics, quiet)
	if err != nil {
		t.Fatal(err)
	}
	const queueLen, extra = 8, 5
	srv, err := NewServer(h, ServerConfig{RelayAddr: "127.0.0.1:0", Workers: 1, QueueLen: queueLen, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	opened := false
	t.Cleanup(func() {
		if !opened {
			close(gated.gate) // let the worker go so that Serve can return
		}
	})
	giaddr := loopAddr(0, 6)
	relay := listenUDP(t, giaddr, dhcpv4.ServerPort)
	send := func(i int) {
		d := benchPacket(dhcpv4.MessageTypeDiscover, net.HardwareAddr{0x02, 0, 0, 0, 0, byte(i)}, giaddr)
		if _, err := relay.WriteTo(d.ToBytes(), srv.RelayAddr()); err != nil {
			t.Fatal(err)
		}
	}
	send(0)
	select {
	case <-gated.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker never took the first request")
	}
	for i := 1; i <= queueLen+extra; i++ {
		send(i)
	}
	testutil.Eventually(t, 10*time.Second, "the oldest queued requests to be dropped", func() bool { return f.dropped(t, "queue_full") == extra })
	if got := metricValue(t, f.reg, "ironflow_dhcp_queue_depth", ""); got != queueLen {
		t.Fatalf("queue depth %v, want %d", got, queueLen)
	}
	close(gated.gate)
	opened = true

	want := []byte{0} // the one being handled, then the newest queueLen
	for i := extra + 1; i <= queueLen+extra; i++ {
		want = append(want, byte(i))
	}
	var got []byte
	buf := make([]byte, 1500)
	relay.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < len(want) {
		n, _, err := relay.ReadFrom(buf)
		if err != nil {
			t.Fatalf("answered %v, want %v: %v", got, want, err)
		}
		resp, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.ClientHWAddr[5])
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("answered %v, want %v", got, want)
	}
}

// metricValue returns the value of the counter or gauge name in reg; reason selects the
// series of a metric labelled by reason.
func metricValue(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if reason != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != reason) {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s{reason=%q} not registered", name, reason)
	return 0
}

// dropped is the count of requests dropped for reason.
func (f *fixture) dropped(t *testing.T, reason string) float64 {
	t.Helper()
	return metricValue(t, f.reg, "ironflow_dhcp_dropped_total", reason)
}
