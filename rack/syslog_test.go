package rack

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev/pgtest"
	"github.com/ironflow/ironflow/internal/testutil"
)

// TestSyslogFailsOverWithTheRegionLink: a rack registered with two processes of one region
// posts syslog through its region link, so when the preferred process stops the messages
// reach the region through the other. The sender is the machine reserved on the rack's
// loopback subnet (its lease granted over relayed DHCP).
func TestSyslogFailsOverWithTheRegionLink(t *testing.T) {
	db := pgtest.NewDatabase(t)
	a := startRegion(t, db, "region-a")
	b := startRegion(t, db, "region-a")
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Register(ctx, RegisterOptions{URLs: []string{a.URL, b.URL}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	mac, reserved := network(t, a.admin(), st.Uuid)
	o := rackOptions(t, dir)
	o.SyslogListen = "127.0.0.1:0" // a fixed port's TCP side can be another test's connection
	syslogAddr := startRack(t, o).p.syslogAddr.String()
	agent := newRelayAgent(t, o.DHCPRelayListen)
	testutil.Eventually(t, 10*time.Second, "the rack's config applied (the reserved address over DHCP)", func() bool { return agent.dora(t, mac) == reserved })

	send := func(text string) {
		t.Helper()
		c, err := (&net.Dialer{LocalAddr: &net.UDPAddr{IP: reserved.AsSlice()}}).Dial("udp", syslogAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("<13>agent: " + text)); err != nil {
			t.Fatal(err)
		}
	}
	logged := func(want int) func() bool {
		return func() bool {
			logs, err := b.admin().MachineLogs(ctx, "Name:birdy", nil)
			return err == nil && len(logs) == want
		}
	}
	send("before failover")
	testutil.Eventually(t, 10*time.Second, "the first message through region A", logged(1))
	a.stop()
	send("after failover")
	testutil.Eventually(t, 15*time.Second, "the second message through region B", logged(2))
}

// syslogRack is a rack serving DHCP over relay and syslog on loopback, with the machine
// reserved on its subnet already granted its address.
type syslogRack struct {
	region     *region
	metricsURL string
	syslogAddr string
	agent      *relayAgent
	reserved   netip.Addr
}

func startSyslogRack(t *testing.T) syslogRack {
	t.Helper()
	r := startRegion(t, pgtest.NewDatabase(t), "region-a")
	dir := t.TempDir()
	st, err := Register(context.Background(), RegisterOptions{URLs: []string{r.URL}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	mac, reserved := network(t, r.admin(), st.Uuid)
	o := rackOptions(t, dir)
	o.SyslogListen = "127.0.0.1:0" // a fixed port's TCP side can be another test's connection
	f := syslogRack{region: r, metricsURL: "http://" + o.HTTPListen + "/metrics", syslogAddr: startRack(t, o).p.syslogAddr.String(),
		agent: newRelayAgent(t, o.DHCPRelayListen), reserved: reserved}
	testutil.Eventually(t, 10*time.Second, "the rack's config applied", func() bool { return f.agent.dora(t, mac) == reserved })
	return f
}

// metricSum adds up the rack's metric samples that series matches (its one group the value).
func (f syslogRack) metricSum(series *regexp.Regexp) int {
	_, body := httpGet(f.metricsURL)
	total := 0
	for _, m := range series.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}

// timeDORAs runs 20 DORAs of new clients, each of which must succeed, and returns how long
// they took.
func (f syslogRack) timeDORAs(t *testing.T, during string) time.Duration {
	t.Helper()
	start := time.Now()
	for i := range 20 {
		if got := f.agent.dora(t, net.HardwareAddr{0x52, 0x54, 0x00, 0xf1, 0x00, byte(i)}); !got.IsValid() {
			t.Fatalf("DORA %d failed during %s", i, during)
		}
	}
	return time.Since(start)
}

// TestDHCPAnswersDuringASyslogFlood: with the region down, a flood of syslog from a served
// address, shed by its rate limit and the full buffer, does not hold DHCP back: every DORA of new clients
// succeeds while it goes on, and the flood is counted.
func TestDHCPAnswersDuringASyslogFlood(t *testing.T) {
	f := startSyslogRack(t)
	f.region.stop()

	c, err := (&net.Dialer{LocalAddr: &net.UDPAddr{IP: f.reserved.AsSlice()}}).Dial("udp", f.syslogAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var stop atomic.Bool
	defer stop.Store(true)
	flooded := make(chan int, 1)
	go func() {
		n := 0
		for !stop.Load() {
			if _, err := c.Write([]byte("<13>flood: " + strconv.Itoa(n))); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
				break
			}
			n++
		}
		flooded <- n
	}()
	// One client's flood is shed by its rate limit before it can fill the buffer; either drop counts.
	shed := regexp.MustCompile(`ironflow_syslog_dropped_total\{reason="(?:buffer_full|rate_limited)"\} (\d+)`)
	testutil.Eventually(t, 30*time.Second, "the flood shed (rate-limited or buffer full)", func() bool { return f.metricSum(shed) > 0 })
	elapsed := f.timeDORAs(t, "the syslog flood")
	stop.Store(true)
	t.Logf("20 DORAs in %v during a flood of %d syslog datagrams, %d dropped (rate_limited or buffer_full)", elapsed, <-flooded, f.metricSum(shed))
}

// TestDHCPAnswersDuringATCPSlotFlood: 111 addresses no client holds, each keeping 4 syslog
// TCP connections open and opening another as soon as one is closed, hold neither DHCP back
// nor the reserved machine's TCP syslog out.
func TestDHCPAnswersDuringATCPSlotFlood(t *testing.T) {
	f := startSyslogRack(t)
	ctx, stop := context.WithCancel(context.Background())
	var flooders sync.WaitGroup
	defer flooders.Wait()
	defer stop()
	var opened, failed atomic.Int64
	for i := range 111 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 2, byte(1+i))}}
		for range 4 {
			flooders.Go(func() {
				for ctx.Err() == nil {
					c, err := d.DialContext(ctx, "tcp", f.syslogAddr)
					if err != nil {
						failed.Add(1)
						return
					}
					opened.Add(1)
					closeAtStop := context.AfterFunc(ctx, func() { c.Close() })
					c.Write([]byte("<13>flood: holding a slot\n"))
					c.Read(make([]byte, 1)) // until the rack (or the end of the test) closes it
					closeAtStop()
					c.Close()
				}
			})
		}
	}
	refused := regexp.MustCompile(`ironflow_syslog_connections_refused_total\{limit="[a-z_]+"\} (\d+)`)
	testutil.Eventually(t, 30*time.Second, "the flood refused", func() bool { return f.metricSum(refused) > 0 })
	elapsed := f.timeDORAs(t, "the TCP slot flood")
	t.Logf("20 DORAs in %v during a TCP slot flood: %d connections opened, %d refused by the rack, %d dials failed",
		elapsed, opened.Load(), f.metricSum(refused), failed.Load())

	c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: f.reserved.AsSlice()}}).Dial("tcp", f.syslogAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("<13>logger: over TCP during the flood\n")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the reserved machine's TCP message at the region", func() bool {
		logs, err := f.region.admin().MachineLogs(context.Background(), "Name:birdy", nil)
		return err == nil && len(logs) == 1 && logs[0].Text == "over TCP during the flood"
	})
}
