package rack

import (
	"context"
	"encoding/json"
	"github.com/ironflow/ironflow/internal/testutil"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironflow/ironflow/dev/pgtest"

	"github.com/ironflow/ironflow/rack/leases"
	"github.com/ironflow/ironflow/region/api"
)

// directLink sends the rack's calls straight to one region.
type directLink struct{ base *url.URL }

func (d directLink) Do(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL = d.base.ResolveReference(req.URL)
	return http.DefaultClient.Do(req)
}

func (d directLink) Current() *url.URL { return d.base }

// poisonRegion stores lease batches, except leases of the poison MAC: it rejects those in
// its answer (individually) or fails the whole batch with a 500, as a region before
// per-record rejection did.
type poisonRegion struct {
	poison       string
	individually bool

	mu     sync.Mutex
	stored map[string]api.Lease // by address
	sent   int                  // how often the poison lease was sent
}

func (r *poisonRegion) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var batch []api.Lease
	if err := json.NewDecoder(req.Body).Decode(&batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res := api.LeaseSyncResult{}
	var good []api.Lease
	for i, l := range batch {
		if l.MAC != r.poison {
			good = append(good, l)
			continue
		}
		r.sent++
		if !r.individually {
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(api.Error{Error: "internal server error", Code: 500})
			return
		}
		res.Rejected = append(res.Rejected, api.LeaseRejection{Index: i, IP: l.Addr, MAC: l.MAC, Error: "invalid"})
	}
	for _, l := range good {
		r.stored[l.Addr] = l
	}
	res.Stored = len(good)
	json.NewEncoder(w).Encode(res)
}

func (r *poisonRegion) has(addr netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.stored[addr.String()]
	return ok
}

func (r *poisonRegion) poisonSent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent
}

// syncingRack is a lease table uploading to a region, as a rack process runs them.
type syncingRack struct {
	table  *leases.Table
	reg    *prometheus.Registry
	stop   func()
	subnet string
}

func startSyncing(t *testing.T, dir, regionURL string) *syncingRack {
	t.Helper()
	tb, err := leases.Open(leases.Options{Dir: dir, Rack: thisRack, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	pool := leases.Pool{Subnet: subnetA, Prefix: netip.MustParsePrefix("10.1.0.0/24"), RangeStart: netip.MustParseAddr("10.1.0.100"),
		RangeEnd: netip.MustParseAddr("10.1.0.200"), LeaseTime: time.Hour}
	if err := tb.Configure([]leases.Pool{pool}); err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse(regionURL)
	reg := prometheus.NewRegistry()
	up, err := leases.NewUploader(tb, regionAPI{link: directLink{base}, rack: thisRack}, leases.UploaderOptions{
		BatchSize: 4, Interval: time.Millisecond, RetryDelay: 5 * time.Millisecond, Registry: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Serve(ctx) }()
	s := &syncingRack{table: tb, reg: reg, subnet: subnetA}
	stopped := false
	s.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			tb.Close()
		}
	}
	t.Cleanup(s.stop)
	return s
}

func (s *syncingRack) grant(t *testing.T, mac net.HardwareAddr) netip.Addr {
	t.Helper()
	a, err := s.table.Offer(s.subnet, mac, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.table.Grant(s.subnet, mac, a, "host"); err != nil {
		t.Fatal(err)
	}
	return a
}

// dropped is the rack's count of leases dropped from the upload queue for reason.
func (s *syncingRack) dropped(reason string) float64 {
	n := 0.0
	mfs, _ := s.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "ironflow_lease_sync_dropped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" && lp.GetValue() == reason {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestLeaseSyncIsolatesAPoisonLease: a lease the region refuses does not hold back the
// others nor later ones, is dropped from the queue (and counted) instead of being sent
// forever, and the same holds after a restart of the rack. Both a region that rejects the
// record individually and one that fails the whole batch (500) are covered.
func TestLeaseSyncIsolatesAPoisonLease(t *testing.T) {
	for _, individually := range []bool{true, false} {
		name := map[bool]string{true: "rejected-individually", false: "whole-batch-500"}[individually]
		t.Run(name, func(t *testing.T) {
			poison := net.HardwareAddr{0x52, 0x54, 0, 0, 0xde, 0xad}
			region := &poisonRegion{poison: poison.String(), individually: individually, stored: map[string]api.Lease{}}
			srv := httptest.NewServer(region)
			defer srv.Close()
			dir := t.TempDir()
			rk := startSyncing(t, dir, srv.URL)

			var good []netip.Addr
			for i := range 9 {
				if i == 4 {
					rk.grant(t, poison)
				}
				good = append(good, rk.grant(t, net.HardwareAddr{0x52, 0x54, 0, 0, 1, byte(i)}))
			}
			testutil.Eventually(t, 10*time.Second, "the good leases at the region", func() bool {
				for _, a := range good {
					if !region.has(a) {
						return false
					}
				}
				return true
			})
			reason := map[bool]string{true: leases.DropRejected, false: leases.DropRefused}[individually]
			testutil.Eventually(t, 10*time.Second, "the poison lease dropped and counted", func() bool { return rk.dropped(reason) == 1 })
			sent := region.poisonSent()

			later := rk.grant(t, net.HardwareAddr{0x52, 0x54, 0, 0, 2, 1})
			testutil.Eventually(t, 10*time.Second, "a later lease at the region", func() bool { return region.has(later) })
			if n := region.poisonSent(); n != sent {
				t.Errorf("the poison lease was sent %d more times after it was dropped", n-sent)
			}

			// A restart sends every lease again once: the poison one is dropped again and the
			// leases granted after the restart still get through.
			rk.stop()
			rk = startSyncing(t, dir, srv.URL)
			testutil.Eventually(t, 10*time.Second, "the poison lease dropped after the restart", func() bool { return rk.dropped(reason) == 1 })
			after := rk.grant(t, net.HardwareAddr{0x52, 0x54, 0, 0, 2, 2})
			testutil.Eventually(t, 10*time.Second, "a lease granted after the restart at the region", func() bool { return region.has(after) })
			if n := region.poisonSent() - sent; n > 2*10 {
				t.Errorf("after the restart the poison lease was sent %d times", n)
			}
		})
	}
}

// TestPoisonLeasesDoNotBlockSyncToARealRegion runs a rack against a real region: a client
// whose DHCP host name carries a NUL byte (which PostgreSQL cannot store) gets its address
// and its lease reaches the region with the name cleaned; a lease in the rack's log that the
// region refuses (an address outside its subnet) is isolated and dropped, and the other
// leases, also later ones, reach the region.
func TestPoisonLeasesDoNotBlockSyncToARealRegion(t *testing.T) {
	r := startRegion(t, pgtest.NewDatabase(t), "region-a")
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Register(ctx, RegisterOptions{URLs: []string{r.URL}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	admin := r.admin()
	network(t, admin, st.Uuid)
	subnets, err := admin.Subnets().List(ctx, nil)
	if err != nil || len(subnets) != 1 {
		t.Fatalf("subnets %v: %v", subnets, err)
	}
	outside := seedLease(t, filepath.Join(dir, leasesDir), st.Uuid, subnets[0].Uuid)

	o := rackOptions(t, dir)
	startRack(t, o)
	agent := newRelayAgent(t, o.DHCPRelayListen)
	named := net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x01}
	var namedAddr netip.Addr
	testutil.Eventually(t, 10*time.Second, "an address for the client with a NUL in its host name", func() bool {
		got, err := agent.DORA(named, dhcpv4.WithOption(dhcpv4.OptHostName("ev\x00il")))
		namedAddr = got
		return err == nil && got.IsValid()
	})
	plain := net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x02}
	plainAddr := agent.dora(t, plain)

	regionLeases := func() map[string]api.Lease {
		ls, err := admin.Leases().List(ctx, url.Values{"Rack": {st.Uuid}})
		if err != nil {
			return nil
		}
		m := map[string]api.Lease{}
		for _, l := range ls {
			m[l.Addr] = l
		}
		return m
	}
	testutil.Eventually(t, 10*time.Second, "both leases at the region", func() bool {
		m := regionLeases()
		_, ok := m[plainAddr.String()]
		return ok && m[namedAddr.String()].Hostname == "evil"
	})
	rackURL := "http://" + o.HTTPListen
	testutil.Eventually(t, 10*time.Second, "the refused lease dropped and counted", func() bool {
		_, metrics := httpGet(rackURL + "/metrics")
		return strings.Contains(metrics, `ironflow_lease_sync_dropped_total{reason="refused"} 1`) ||
			strings.Contains(metrics, `ironflow_lease_sync_dropped_total{reason="rejected"} 1`)
	})
	later := agent.dora(t, net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x03})
	testutil.Eventually(t, 10*time.Second, "a later lease at the region", func() bool {
		_, ok := regionLeases()[later.String()]
		return ok
	})
	if _, ok := regionLeases()[outside.String()]; ok {
		t.Errorf("the region stored %s, outside its subnet", outside)
	}
}

// seedLease writes into the rack's lease log a lease of subnet at an address outside the
// subnet's network, as a rack would hold after the subnet was renumbered on the region.
func seedLease(t *testing.T, dir, rack, subnet string) netip.Addr {
	t.Helper()
	tb, err := leases.Open(leases.Options{Dir: dir, Rack: rack, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	a := netip.MustParseAddr("10.99.0.5")
	if err := tb.Configure([]leases.Pool{{Subnet: subnet, Prefix: netip.MustParsePrefix("10.99.0.0/24"), RangeStart: a, RangeEnd: a, LeaseTime: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x99, 0x05}
	if _, err := tb.Offer(subnet, mac, a); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Grant(subnet, mac, a, "renumbered"); err != nil {
		t.Fatal(err)
	}
	return a
}
