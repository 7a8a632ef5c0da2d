package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/internal/dhcptest"
	"github.com/ironflow/ironflow/region/api"
	regionclient "github.com/ironflow/ironflow/region/client"
	"github.com/ironflow/ironflow/workflows"
)

// relayNet is a loopback /24 for this test process, added to rack-a's VLAN: the DHCP relay
// the test plays listens on its .1 (giaddr:67), which must lie in a subnet the rack serves.
// It stays clear of the /24s the rack packages' tests use (127.1-31.x.x).
func relayNet() netip.Prefix {
	pid := os.Getpid()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(32 + pid%32), byte(pid / 32 % 256), 0}), 24)
}

func relayNetAddr(last byte) netip.Addr {
	b := relayNet().Addr().As4()
	b[3] = last
	return netip.AddrFrom4(b)
}

// doraLoop runs DORA for mac every interval until stop is closed and counts the outcomes.
type doraLoop struct {
	mu       sync.Mutex
	ok       int
	failures []string
	done     chan struct{}
}

func startDORALoop(relay *dhcptest.Relay, mac net.HardwareAddr, want netip.Addr, interval time.Duration, stop <-chan struct{}) *doraLoop {
	l := &doraLoop{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			got, err := relay.DORA(mac)
			l.mu.Lock()
			switch {
			case err != nil:
				l.failures = append(l.failures, fmt.Sprintf("%s: %v", time.Now().Format(time.StampMilli), err))
			case got != want:
				l.failures = append(l.failures, fmt.Sprintf("%s: acknowledged %s, want the reservation %s", time.Now().Format(time.StampMilli), got, want))
			default:
				l.ok++
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// TestTransferRackKeepsDHCPServing transfers rack-a with its 24 machines from region-a to
// region-b while a client behind the rack's relay runs DORA every 100 ms, and an operation
// queued while the rack is paused is released on region-b.
func TestTransferRackKeepsDHCPServing(t *testing.T) {
	s := startStack(t, dev.StackOptions{Seed: true, RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")
	rack := s.Racks["rack-a"]

	machines, err := a.Machines().List(ctx, url.Values{"Rack": {rack.Uuid}})
	if err != nil {
		t.Fatal(err)
	}
	if len(machines) != dev.RackMachines {
		t.Fatalf("%d machines behind rack-a, want %d", len(machines), dev.RackMachines)
	}
	dhcpClient := machines[0]
	mac, err := net.ParseMAC(dhcpClient.HardwareAddrs[0])
	if err != nil {
		t.Fatal(err)
	}
	reserved := relayNetAddr(50)
	relaySubnet := addRelaySubnet(ctx, t, a, rack.Uuid)
	if _, err := a.Machines().Patch(ctx, dhcpClient.Uuid, []byte(fmt.Sprintf(`{"Address": %q}`, reserved))); err != nil {
		t.Fatal(err)
	}
	relay := dhcptest.NewRelay(t, relayNetAddr(1), rack.DHCPRelay)
	// A rack starts degraded until its first heartbeat after it has its config.
	pollUntil(t, 30*time.Second, "rack-a online", func() (bool, error) {
		r, err := a.Racks().Get(ctx, rack.Uuid)
		return r.Status == api.RackOnline, err
	})
	pollUntil(t, 30*time.Second, "rack-a answers DHCP for "+dhcpClient.Name+" with its reservation", func() (bool, error) {
		got, err := relay.DORA(mac)
		return got == reserved, err
	})
	// The machine's syslog before the transfer is on region-b after it, and the rack's new lines follow.
	sys := &rackSyslog{t: t, from: reserved, rack: rack.Syslog, uuid: dhcpClient.Uuid}
	sys.attributed(a)
	sys.stored(a, "before the transfer")
	syslogBefore := syslogLines(t, s, "region-a", dhcpClient.Uuid)

	stop := make(chan struct{})
	loop := startDORALoop(relay, mac, reserved, 100*time.Millisecond, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
	}()

	in := workflows.TransferRackInput{SourceRegion: "region-a", TargetRegion: "region-b", Rack: rack.Uuid}
	in.Grant = grant(ctx, t, s, in.SourceRegion, api.GrantRequest{Kind: api.GrantRack, Key: rack.Uuid, TargetRegion: in.TargetRegion})
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.TransferRackID(rack.Uuid), TaskQueue: workflows.TaskQueue}, workflows.TransferRack, in)
	if err != nil {
		t.Fatal(err)
	}
	waitForPhase(ctx, t, s, run.GetID(), workflows.PhaseMigratingMachines)
	queued, err := a.QueueRackOperation(ctx, rack.Uuid, api.PendingOperation{Target: machines[1].Uuid, Kind: "power-on"})
	if err != nil {
		t.Fatalf("queue an operation while rack-a is paused: %v", err)
	}
	var res workflows.TransferRackResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("transfer failed: %v", err)
	}
	close(stop)
	<-loop.done

	if len(loop.failures) > 0 || loop.ok == 0 {
		t.Errorf("DHCP during the transfer: %d DORA succeeded, %d failed: %v", loop.ok, len(loop.failures), loop.failures)
	}
	t.Logf("DHCP during the transfer: %d DORA exchanges, all acknowledged with %s", loop.ok, reserved)
	if res.Machines != dev.RackMachines || res.Copied.Subnets != 2 || res.Released < 1 {
		t.Errorf("result %+v: want %d machines, 2 subnets, the queued operation %d released", res, dev.RackMachines, queued.ID)
	}

	for _, m := range machines {
		assertActiveOnExactlyOne(ctx, t, s, m.Uuid, "region-b")
	}
	sameSyslog(t, "machines logs of "+dhcpClient.Name+" on region-b after the transfer", syslogLines(t, s, "region-b", dhcpClient.Uuid), syslogBefore)
	sys.stored(b, "after the transfer")
	afterLine := syslogLines(t, s, "region-b", dhcpClient.Uuid)
	sameSyslog(t, "machines logs of "+dhcpClient.Name+" on region-b after a new line", afterLine, append(slices.Clone(syslogBefore), afterLine[len(afterLine)-1]))
	moved, err := b.Racks().Get(ctx, rack.Uuid)
	if err != nil {
		t.Fatalf("rack-a on region-b: %v", err)
	}
	if moved.Status != api.RackOnline || !slices.Contains(moved.RegionEndpoints, s.Regions["region-b"].URL) {
		t.Errorf("rack-a on region-b: Status %q, RegionEndpoints %v; want online, registered with %s", moved.Status, moved.RegionEndpoints, s.Regions["region-b"].URL)
	}
	assertGone(t, "rack-a on region-a", func() error { _, err := a.Racks().Get(ctx, rack.Uuid); return err })
	for _, cidr := range []string{"10.42.0.0/24", relaySubnet.CIDR} {
		if _, err := b.Subnets().Get(ctx, "CIDR:"+cidr); err != nil {
			t.Errorf("subnet %s on region-b: %v", cidr, err)
		}
		assertGone(t, "subnet "+cidr+" on region-a", func() error { _, err := a.Subnets().Get(ctx, "CIDR:"+cidr); return err })
	}
	leases, err := b.Leases().List(ctx, url.Values{"MAC": {mac.String()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) == 0 || leases[0].Addr != reserved.String() {
		t.Errorf("leases of %s on region-b: %+v, want one for %s", mac, leases, reserved)
	}
	if ops, err := b.RackOperations(ctx, rack.Uuid); err != nil || len(ops) != 0 {
		t.Errorf("unreleased operations of rack-a on region-b: %v (%v)", ops, err)
	}
	// The machines moved in a batch; each one's move is still found by the machine.
	out, err := runCLIAs(t, s, s.AdminToken, "-E", s.Regions["region-a"].URL, "migrations", "list", "--machine", machines[5].Uuid, "-o", "json")
	var moves []struct{ WorkflowID, Status, MachineName string }
	if err != nil || json.Unmarshal([]byte(out), &moves) != nil || len(moves) != 1 ||
		!strings.HasPrefix(moves[0].WorkflowID, workflows.TransferRackID(rack.Uuid)+"/batch/") || moves[0].Status != "completed" ||
		moves[0].MachineName != fmt.Sprintf("batch of %d", dev.RackMachines) {
		t.Errorf("migrations list --machine %s: %s (%v); want the completed batch of the transfer", machines[5].Uuid, out, err)
		return
	}
	out, err = runCLIAs(t, s, s.AdminToken, "-E", s.Regions["region-a"].URL, "migrations", "show", moves[0].WorkflowID, "-o", "json")
	var batch struct{ Result struct{ Moved []string } }
	if err != nil || json.Unmarshal([]byte(out), &batch) != nil || len(batch.Result.Moved) != dev.RackMachines || !slices.Contains(batch.Result.Moved, machines[5].Uuid) {
		t.Errorf("migrations show %s: %s (%v); want the %d machines it moved", moves[0].WorkflowID, out, err, dev.RackMachines)
	}
}

// addRelaySubnet adds relayNet to the VLAN the rack serves on c, so relayed requests from
// the test's giaddr reach a subnet of the rack.
func addRelaySubnet(ctx context.Context, t *testing.T, c *regionclient.Client, rack string) api.Subnet {
	t.Helper()
	vlans, err := c.VLANs().List(ctx, url.Values{"PrimaryRack": {rack}})
	if err != nil || len(vlans) != 1 {
		t.Fatalf("VLANs of rack %s: %v (%v)", rack, vlans, err)
	}
	sn, err := c.Subnets().Create(ctx, api.Subnet{Name: "rack-a-relay", CIDR: relayNet().String(), VLAN: vlans[0].Uuid,
		Gateway: relayNetAddr(1).String(), LeaseSeconds: 600,
		// The rack serves no subnet without a dynamic range, reservations included.
		DynamicRange: api.IPRange{Start: relayNetAddr(100).String(), End: relayNetAddr(199).String()}})
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

func assertGone(t *testing.T, what string, get func() error) {
	t.Helper()
	var apiErr *regionclient.APIError
	if err := get(); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("%s: want 404, got %v", what, err)
	}
}
