package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

// rackSyslog is a machine that sends syslog to its rack from its reserved address.
type rackSyslog struct {
	t    *testing.T
	from netip.Addr // the machine's reservation, in a subnet the rack serves
	rack string     // the rack's syslog listener
	uuid string     // the machine
	sent int        // probes sent
}

// send sends text over UDP from the machine's address.
func (m *rackSyslog) send(text string) {
	m.t.Helper()
	to, err := net.ResolveUDPAddr("udp", m.rack)
	if err != nil {
		m.t.Fatal(err)
	}
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: m.from.AsSlice()}, to)
	if err != nil {
		m.t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "<14>1 2026-03-01T10:00:00Z %s test - - - %s", "machine", text); err != nil {
		m.t.Fatal(err)
	}
}

// stored sends text and waits until region shows it as the machine's last line.
func (m *rackSyslog) stored(region *regionclient.Client, text string) {
	m.t.Helper()
	m.send(text)
	pollUntil(m.t, 30*time.Second, "the rack's syslog line "+text+" on the machine's region", func() (bool, error) {
		logs, err := region.MachineLogs(context.Background(), m.uuid, url.Values{})
		return err == nil && len(logs) > 0 && logs[len(logs)-1].Text == text, err
	})
}

// attributed waits until the rack files the machine's lines under it on region: until its
// config has the machine's reservation, it drops them.
func (m *rackSyslog) attributed(region *regionclient.Client) {
	m.t.Helper()
	pollUntil(m.t, 30*time.Second, "the rack files syslog from "+m.from.String()+" under the machine", func() (bool, error) {
		m.sent++
		m.send(fmt.Sprintf("probe %d", m.sent))
		logs, err := region.MachineLogs(context.Background(), m.uuid, url.Values{})
		return err == nil && len(logs) > 0, err
	})
}

// syslogLines is a machine's syslog on a region as `machines logs -o json` prints it: each
// line with its receipt time, rack, address and text.
func syslogLines(t *testing.T, s *dev.Stack, region, machine string) []string {
	t.Helper()
	out, err := runCLIAs(t, s, s.AdminToken, "-E", s.Regions[region].URL, "machines", "logs", machine, "-o", "json")
	if err != nil {
		t.Fatalf("machines logs %s on %s: %v\n%s", machine, region, err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m api.SyslogMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("machines logs line %q: %v", l, err)
		}
		lines = append(lines, syslogLine(m))
	}
	return lines
}

func syslogLine(m api.SyslogMessage) string {
	return fmt.Sprintf("%s %s %s %s", m.Received.UTC().Format(time.RFC3339Nano), m.Rack, m.Addr, m.Text)
}

func sameSyslog(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMigratedMachineKeepsItsSyslog: a line the machine sent to its rack's syslog listener
// before it migrated shows in `machines logs` on the target afterwards, with the other lines
// of the source in order, their receipt times and rack.
func TestMigratedMachineKeepsItsSyslog(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := regionClient(s, "region-a")
	rack := s.Racks["rack-a"]
	node := getMachine(ctx, t, a, "Name:node-03.rack-a")
	m := &rackSyslog{t: t, from: relayNetAddr(53), rack: rack.Syslog, uuid: node.Uuid}
	addRelaySubnet(ctx, t, a, rack.Uuid)
	if _, err := a.Machines().Patch(ctx, node.Uuid, []byte(fmt.Sprintf(`{"Address": %q}`, m.from))); err != nil {
		t.Fatal(err)
	}
	m.attributed(a)
	m.stored(a, "before the move")
	onSource := syslogLines(t, s, "region-a", node.Uuid)

	migrate(ctx, t, s, workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: node.Uuid})
	assertActiveOnExactlyOne(ctx, t, s, node.Uuid, "region-b")
	onTarget := syslogLines(t, s, "region-b", node.Uuid)
	sameSyslog(t, "machines logs on region-b after the move", onTarget, onSource)
	if len(onTarget) == 0 || !strings.HasSuffix(onTarget[len(onTarget)-1], " "+rack.Uuid+" "+m.from.String()+" before the move") {
		t.Errorf("machines logs on region-b end with %q, want the line sent before the move", onTarget)
	}
}
