package rack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

// TestSyslogFromALeasedAddressOverVeth: a machine leases a dynamic address by broadcast DHCP
// from the rack and sends syslog from it over UDP and TCP to the rack's port 514 in its
// namespace; both messages end up in the machine's logs on the region (what `ironflow
// machines logs` shows), attributed by the lease, with control characters escaped. A message
// from an address of the same link that holds no lease reaches no machine. The real CLI
// prints both.
func TestSyslogFromALeasedAddressOverVeth(t *testing.T) {
	v := newVethRack(t)
	v.syslogListen = v.serverIP.String() + ":514"
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	ctx := context.Background()
	machine, err := v.admin.Machines().Create(ctx, api.Machine{Name: "syslog-machine", HardwareAddrs: []string{v.mac.String()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.admin.Machines().Create(ctx, api.Machine{Name: "bystander", HardwareAddrs: []string{"52:54:00:77:00:02"}, Address: "10.77.0.60"}); err != nil {
		t.Fatal(err)
	}
	v.start(t)
	var leased netip.Addr
	v.lease(t, v.mac, "a dynamic address", func(ack *dhcpv4.DHCPv4) bool {
		leased = ackAddr(ack.YourIPAddr)
		return netip.MustParsePrefix("10.77.0.0/24").Contains(leased)
	})
	netnstest.IP(t, "-n", v.cliNS, "addr", "add", leased.String()+"/24", "dev", v.cliIf)
	netnstest.IP(t, "-n", v.cliNS, "addr", "add", "10.77.0.99/24", "dev", v.cliIf)

	rackAddr := v.syslogListen
	send := func(network string, from netip.Addr, payload string) {
		netnstest.Run(t, v.cliNS, func() error {
			d := net.Dialer{Timeout: 5 * time.Second}
			if network == "udp" {
				d.LocalAddr = &net.UDPAddr{IP: from.AsSlice()}
			} else {
				d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
			}
			c, err := d.Dial(network, rackAddr)
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte(payload))
			return err
		})
	}
	tcpMsg := "<30>1 2026-12-01T15:00:00Z syslog-machine systemd 1 - - Reached target \x1b[1mMulti-User\x1b[0m"
	send("udp", leased, "<13>Dec  1 15:00:01 syslog-machine kernel: hello over UDP")
	send("tcp", leased, fmt.Sprintf("%d %s", len(tcpMsg), tcpMsg))
	send("udp", netip.MustParseAddr("10.77.0.99"), "<13>kernel: from an address with no lease")

	want := []string{`Reached target \x1b[1mMulti-User\x1b[0m`, "hello over UDP"} // sorted
	var logs []api.SyslogMessage
	testutil.Eventually(t, 15*time.Second, "both messages in the machine's logs", func() bool {
		logs, err = v.admin.MachineLogs(ctx, "Name:syslog-machine", nil)
		if err != nil || len(logs) != 2 {
			return false
		}
		texts := []string{logs[0].Text, logs[1].Text}
		slices.Sort(texts)
		return slices.Equal(texts, want)
	})
	for _, m := range logs {
		if m.Machine != machine.Uuid || m.Addr != leased.String() || m.MAC != v.mac.String() || m.Hostname != "syslog-machine" {
			t.Errorf("message %+v, want machine %s from %s (%s)", m, machine.Uuid, leased, v.mac)
		}
	}
	if other, err := v.admin.MachineLogs(ctx, "Name:bystander", nil); err != nil || len(other) != 0 {
		t.Fatalf("bystander's logs %+v, %v: want none", other, err)
	}

	// And as an operator reads them: `ironflow machines logs`, the real binary.
	out, err := exec.Command(buildCLI(t), "-E", v.region.URL, "--token", adminToken, "machines", "logs", "Name:syslog-machine").CombinedOutput()
	if err != nil {
		t.Fatalf("machines logs: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("machines logs printed %d lines, want 2:\n%s", len(lines), out)
	}
	for i, want := range []string{"kernel: hello over UDP", `systemd[1]: Reached target \x1b[1mMulti-User\x1b[0m`} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, " "+leased.String()+" ") && strings.HasSuffix(l, want) }) {
			t.Errorf("machines logs has no line %d from %s ending %q:\n%s", i, leased, want, out)
		}
	}
}

// buildCLI builds the ironflow binary into the test's temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ironflow")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/ironflow").CombinedOutput(); err != nil {
		t.Fatalf("build ironflow: %v\n%s", err, out)
	}
	return bin
}
