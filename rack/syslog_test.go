package rack

import (
	"context"
	"net"
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
	o.SyslogListen = testutil.FreeUDPAddr(t)
	startRack(t, o)
	agent := newRelayAgent(t, o.DHCPRelayListen)
	testutil.Eventually(t, 10*time.Second, "the rack's config applied (the reserved address over DHCP)", func() bool { return agent.dora(t, mac) == reserved })

	send := func(text string) {
		t.Helper()
		c, err := (&net.Dialer{LocalAddr: &net.UDPAddr{IP: reserved.AsSlice()}}).Dial("udp", o.SyslogListen)
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
