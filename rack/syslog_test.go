package rack

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strconv"
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

// TestDHCPAnswersDuringASyslogFlood: with the region down, a flood of syslog from a served
// address, shed by its rate limit and the full buffer, does not hold DHCP back: every DORA of new clients
// succeeds while it goes on, and the flood is counted.
func TestDHCPAnswersDuringASyslogFlood(t *testing.T) {
	r := startRegion(t, pgtest.NewDatabase(t), "region-a")
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Register(ctx, RegisterOptions{URLs: []string{r.URL}, Secret: testSecret, Name: "rack-1", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	mac, reserved := network(t, r.admin(), st.Uuid)
	o := rackOptions(t, dir)
	o.SyslogListen = "127.0.0.1:0" // a fixed port's TCP side can be another test's connection
	syslogAddr := startRack(t, o).p.syslogAddr.String()
	agent := newRelayAgent(t, o.DHCPRelayListen)
	testutil.Eventually(t, 10*time.Second, "the rack's config applied", func() bool { return agent.dora(t, mac) == reserved })
	r.stop()

	c, err := (&net.Dialer{LocalAddr: &net.UDPAddr{IP: reserved.AsSlice()}}).Dial("udp", syslogAddr)
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
	dropped := func() int {
		_, body := httpGet("http://" + o.HTTPListen + "/metrics")
		total := 0
		for _, m := range shed.FindAllStringSubmatch(body, -1) {
			n, _ := strconv.Atoi(m[1])
			total += n
		}
		return total
	}
	testutil.Eventually(t, 30*time.Second, "the flood shed (rate-limited or buffer full)", func() bool { return dropped() > 0 })
	start := time.Now()
	for i := range 20 {
		if got := agent.dora(t, net.HardwareAddr{0x52, 0x54, 0x00, 0xf1, 0x00, byte(i)}); !got.IsValid() {
			t.Fatalf("DORA %d failed during the syslog flood", i)
		}
	}
	elapsed := time.Since(start)
	stop.Store(true)
	t.Logf("20 DORAs in %v during a flood of %d syslog datagrams, %d dropped (rate_limited or buffer_full)", elapsed, <-flooded, dropped())
}
