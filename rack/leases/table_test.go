package leases

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

const subnetID = "3f1c0de4-0000-4000-8000-000000000001"

func mac(i int) net.HardwareAddr {
	return net.HardwareAddr{0x52, 0x54, 0, byte(i >> 16), byte(i >> 8), byte(i)}
}

func testPool() Pool {
	return Pool{
		Subnet:     subnetID,
		Prefix:     netip.MustParsePrefix("10.0.0.0/24"),
		RangeStart: netip.MustParseAddr("10.0.0.10"),
		RangeEnd:   netip.MustParseAddr("10.0.0.19"),
		Excluded:   []netip.Addr{netip.MustParseAddr("10.0.0.11")},
		Reservations: []Reservation{
			{MAC: mac(100), Addr: netip.MustParseAddr("10.0.0.12"), Hostname: "birdy", MachineRef: "m-1"},
			{MAC: mac(101), Addr: netip.MustParseAddr("10.0.0.200"), Hostname: "outside"},
		},
		LeaseTime: time.Hour,
	}
}

func openTable(t *testing.T, dir string, c *clock, pools ...Pool) *Table {
	t.Helper()
	tb, err := Open(Options{Dir: dir, Rack: "rack-1", Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	if err := tb.Configure(pools); err != nil {
		t.Fatal(err)
	}
	return tb
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)} }

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func grant(t *testing.T, tb *Table, m net.HardwareAddr) Lease {
	t.Helper()
	a, err := tb.Offer(subnetID, m, netip.Addr{})
	if err != nil {
		t.Fatalf("offer to %s: %v", m, err)
	}
	l, err := tb.Grant(subnetID, m, a, "")
	if err != nil {
		t.Fatalf("grant %s to %s: %v", a, m, err)
	}
	return l
}

func TestAllocationSkipsExcludedAndReservedAndExhausts(t *testing.T) {
	tb := openTable(t, t.TempDir(), newClock(), testPool())
	// 10 addresses, minus .11 (excluded) and .12 (reserved): 8 dynamic ones.
	got := map[netip.Addr]bool{}
	for i := range 8 {
		l := grant(t, tb, mac(i))
		if got[l.Addr] || l.Addr == addr("10.0.0.11") || l.Addr == addr("10.0.0.12") {
			t.Fatalf("lease %d got %s (already given, excluded or reserved)", i, l.Addr)
		}
		got[l.Addr] = true
	}
	if _, err := tb.Offer(subnetID, mac(8), netip.Addr{}); !errors.Is(err, ErrExhausted) {
		t.Fatalf("offer on a full range: err = %v, want ErrExhausted", err)
	}
	// The reservation is still honoured on a full range.
	if a, err := tb.Offer(subnetID, mac(100), netip.Addr{}); err != nil || a != addr("10.0.0.12") {
		t.Fatalf("reserved offer = %s, %v; want 10.0.0.12", a, err)
	}
}

func TestOfferPreferences(t *testing.T) {
	c := newClock()
	tb := openTable(t, t.TempDir(), c, testPool())
	cases := []struct {
		name      string
		mac       net.HardwareAddr
		requested netip.Addr
		want      netip.Addr
	}{
		{"reservation in range", mac(100), netip.Addr{}, addr("10.0.0.12")},
		{"reservation outside range wins over requested", mac(101), addr("10.0.0.15"), addr("10.0.0.200")},
		{"requested free address", mac(1), addr("10.0.0.17"), addr("10.0.0.17")},
		{"retransmitted discover gets the same offer", mac(1), netip.Addr{}, addr("10.0.0.17")},
		{"requested address offered to another", mac(2), addr("10.0.0.17"), addr("10.0.0.10")},
		{"requested reserved address", mac(3), addr("10.0.0.12"), addr("10.0.0.13")},
		{"requested excluded address", mac(4), addr("10.0.0.11"), addr("10.0.0.14")},
		{"requested address outside range", mac(5), addr("10.0.0.100"), addr("10.0.0.15")},
	}
	for _, tc := range cases {
		got, err := tb.Offer(subnetID, tc.mac, tc.requested)
		if err != nil || got != tc.want {
			t.Errorf("%s: offer = %s, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	// A client that had a lease gets its address back after releasing it.
	l, err := tb.Grant(subnetID, mac(1), addr("10.0.0.17"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Release(subnetID, mac(1), l.Addr); err != nil {
		t.Fatal(err)
	}
	if got, err := tb.Offer(subnetID, mac(1), netip.Addr{}); err != nil || got != l.Addr {
		t.Errorf("offer after release = %s, %v; want previous %s", got, err, l.Addr)
	}
}

func TestGrantChecks(t *testing.T) {
	tb := openTable(t, t.TempDir(), newClock(), testPool())
	held := grant(t, tb, mac(1))
	cases := []struct {
		name   string
		subnet string
		mac    net.HardwareAddr
		addr   netip.Addr
		want   error
	}{
		{"held by another MAC", subnetID, mac(2), held.Addr, ErrConflict},
		{"reserved for another MAC", subnetID, mac(2), addr("10.0.0.12"), ErrConflict},
		{"excluded", subnetID, mac(2), addr("10.0.0.11"), ErrNotOurs},
		{"outside the range", subnetID, mac(2), addr("10.0.0.50"), ErrNotOurs},
		{"outside the subnet", subnetID, mac(2), addr("192.168.1.1"), ErrNotOurs},
		{"unknown subnet", "nope", mac(2), addr("10.0.0.15"), ErrUnknownSubnet},
		{"no MAC", subnetID, nil, addr("10.0.0.15"), ErrInvalid},
		{"invalid address", subnetID, mac(2), netip.Addr{}, ErrInvalid},
	}
	for _, tc := range cases {
		if _, err := tb.Grant(tc.subnet, tc.mac, tc.addr, ""); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := tb.Export(); len(got) != 1 || got[0].Addr != held.Addr.String() {
		t.Fatalf("failed grants changed the table: %+v", got)
	}
}

func TestRenewKeepsStartAndReservationNames(t *testing.T) {
	c := newClock()
	tb := openTable(t, t.TempDir(), c, testPool())
	first, err := tb.Grant(subnetID, mac(100), addr("10.0.0.12"), "client-name")
	if err != nil {
		t.Fatal(err)
	}
	if first.Hostname != "birdy" || first.MachineRef != "m-1" {
		t.Errorf("reserved lease hostname/machine = %q/%q, want birdy/m-1", first.Hostname, first.MachineRef)
	}
	c.Advance(30 * time.Minute)
	renewed, err := tb.Grant(subnetID, mac(100), addr("10.0.0.12"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !renewed.Start.Equal(first.Start) || !renewed.Expires.Equal(c.Now().Add(time.Hour)) {
		t.Errorf("renewal: start %v expires %v; want start %v, expires %v", renewed.Start, renewed.Expires, first.Start, c.Now().Add(time.Hour))
	}
}

func TestMovingToAnotherAddressReleasesTheOld(t *testing.T) {
	tb := openTable(t, t.TempDir(), newClock(), testPool())
	old := grant(t, tb, mac(1))
	if _, err := tb.Grant(subnetID, mac(1), addr("10.0.0.18"), ""); err != nil {
		t.Fatal(err)
	}
	if l, _ := tb.Lookup(old.Addr); l.State != Released {
		t.Fatalf("old lease state = %s, want released", l.State)
	}
	if l, _ := tb.LookupMAC(subnetID, mac(1)); l.Addr != addr("10.0.0.18") {
		t.Fatalf("lease by MAC = %s, want 10.0.0.18", l.Addr)
	}
}

func TestExpiryReclaimsAddresses(t *testing.T) {
	c := newClock()
	tb := openTable(t, t.TempDir(), c, testPool())
	for i := range 8 {
		grant(t, tb, mac(i))
	}
	if _, err := tb.Offer(subnetID, mac(50), netip.Addr{}); !errors.Is(err, ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted", err)
	}
	c.Advance(time.Hour)
	grant(t, tb, mac(50))
	states := map[string]int{}
	for _, l := range tb.Export() {
		states[l.State]++
	}
	if states["active"] != 1 || states["expired"] != 7 || len(states) != 2 {
		t.Fatalf("lease states after expiry and one new grant: %v", states)
	}
}

func TestOffersExpire(t *testing.T) {
	c := newClock()
	tb := openTable(t, t.TempDir(), c, testPool())
	for i := range 8 {
		if _, err := tb.Offer(subnetID, mac(i), netip.Addr{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.Offer(subnetID, mac(50), netip.Addr{}); !errors.Is(err, ErrExhausted) {
		t.Fatalf("err = %v, want ErrExhausted while offers are held", err)
	}
	c.Advance(31 * time.Second)
	grant(t, tb, mac(50))
	if got := tb.Export(); len(got) != 1 {
		t.Fatalf("offers must not appear as leases: %+v", got)
	}
}

func TestReleaseAndDecline(t *testing.T) {
	c := newClock()
	tb := openTable(t, t.TempDir(), c, testPool())
	l := grant(t, tb, mac(1))

	if err := tb.Release(subnetID, mac(2), l.Addr); !errors.Is(err, ErrNoLease) {
		t.Fatalf("release by another MAC: err = %v, want ErrNoLease", err)
	}
	if err := tb.Decline(subnetID, mac(1), l.Addr); err != nil {
		t.Fatal(err)
	}
	if got, _ := tb.Lookup(l.Addr); got.State != Declined {
		t.Fatalf("state after decline = %s", got.State)
	}
	if _, err := tb.Grant(subnetID, mac(1), l.Addr, ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("granting a quarantined address: err = %v, want ErrConflict", err)
	}
	if a, _ := tb.Offer(subnetID, mac(1), netip.Addr{}); a == l.Addr {
		t.Fatalf("declined address %s offered again to its decliner", a)
	}
	c.Advance(11 * time.Minute)
	if _, err := tb.Grant(subnetID, mac(3), l.Addr, ""); err != nil {
		t.Fatalf("granting after the quarantine: %v", err)
	}

	l2 := grant(t, tb, mac(4))
	if err := tb.Release(subnetID, mac(4), l2.Addr); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Grant(subnetID, mac(5), l2.Addr, ""); err != nil {
		t.Fatalf("a released address must be free at once: %v", err)
	}
	if err := tb.Release(subnetID, mac(4), l2.Addr); !errors.Is(err, ErrNoLease) {
		t.Fatalf("second release: err = %v, want ErrNoLease", err)
	}
}

// TestReservationOnlyPool: a pool without a dynamic range grants its reservations (inside
// or outside where a range would be) and nothing else.
func TestReservationOnlyPool(t *testing.T) {
	p := testPool()
	p.RangeStart, p.RangeEnd = netip.Addr{}, netip.Addr{}
	tb := openTable(t, t.TempDir(), newClock(), p)
	for _, r := range p.Reservations {
		a, err := tb.Offer(subnetID, r.MAC, netip.Addr{})
		if err != nil || a != r.Addr {
			t.Fatalf("offer to reserved %s: %s, %v; want %s", r.MAC, a, err, r.Addr)
		}
		if _, err := tb.Grant(subnetID, r.MAC, a, ""); err != nil {
			t.Fatalf("grant of reserved %s: %v", a, err)
		}
	}
	if a, err := tb.Offer(subnetID, mac(1), addr("10.0.0.15")); !errors.Is(err, ErrExhausted) {
		t.Fatalf("offer to an unknown client: %s, %v; want ErrExhausted", a, err)
	}
	if _, err := tb.Grant(subnetID, mac(1), addr("10.0.0.15"), ""); !errors.Is(err, ErrNotOurs) {
		t.Fatalf("grant to an unknown client: %v; want ErrNotOurs", err)
	}
}

func TestConfigureRejectsBadPools(t *testing.T) {
	tb := openTable(t, t.TempDir(), newClock())
	good := testPool()
	mod := func(f func(p *Pool)) Pool { p := good; f(&p); return p }
	cases := map[string][]Pool{
		"no id":           {mod(func(p *Pool) { p.Subnet = "" })},
		"IPv6":            {mod(func(p *Pool) { p.Prefix = netip.MustParsePrefix("fd00::/64") })},
		"range outside":   {mod(func(p *Pool) { p.RangeEnd = addr("10.0.1.5") })},
		"range reversed":  {mod(func(p *Pool) { p.RangeStart, p.RangeEnd = p.RangeEnd, p.RangeStart })},
		"zero lease time": {mod(func(p *Pool) { p.LeaseTime = 0 })},
		"half a range":    {mod(func(p *Pool) { p.RangeStart = netip.Addr{} })},
		"no range, no lease time": {mod(func(p *Pool) {
			p.RangeStart, p.RangeEnd, p.LeaseTime = netip.Addr{}, netip.Addr{}, 0
		})},
		"reservation outside": {mod(func(p *Pool) { p.Reservations = []Reservation{{MAC: mac(1), Addr: addr("10.9.9.9")}} })},
		"double reservation": {mod(func(p *Pool) {
			p.Reservations = []Reservation{{MAC: mac(1), Addr: addr("10.0.0.5")}, {MAC: mac(2), Addr: addr("10.0.0.5")}}
		})},
		"duplicate subnet": {good, good},
	}
	for name, pools := range cases {
		if err := tb.Configure(pools); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := tb.Offer(subnetID, mac(1), netip.Addr{}); !errors.Is(err, ErrUnknownSubnet) {
		t.Fatalf("a rejected configuration was applied: %v", err)
	}
}

func TestConcurrentGrantsAreDistinct(t *testing.T) {
	p := testPool()
	p.RangeStart, p.RangeEnd = addr("10.0.0.0"), addr("10.0.0.255")
	tb := openTable(t, t.TempDir(), newClock(), p)
	var wg sync.WaitGroup
	leases := make([]Lease, 200)
	errs := make([]error, len(leases))
	for i := range leases {
		wg.Go(func() {
			a, err := tb.Offer(subnetID, mac(i), netip.Addr{})
			if err == nil {
				leases[i], err = tb.Grant(subnetID, mac(i), a, fmt.Sprintf("h%d", i))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	for i, l := range leases {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if j, dup := seen[l.Addr]; dup {
			t.Fatalf("clients %d and %d both hold %s", i, j, l.Addr)
		}
		seen[l.Addr] = i
	}
}
