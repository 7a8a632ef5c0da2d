package integration

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
)

// TestMachineAddCommissionsThroughIPMI adds a machine by a real ipmi_sim BMC with the CLI and
// commissions it through its rack's worker. First the machine never network-boots: the
// workflow gives up after --timeout, powers it off through IPMI and records Failed
// commissioning with the step and why. Then `machines commission` powers it on again, an
// enlistment carrying the BMC address lands on this record (as the discovery image's agent's
// does, through the operator's token here: no VM boots in this test), and the machine becomes
// Ready and is powered off; no other machine is created. A second machine with the same BMC
// is refused and not left behind.
func TestMachineAddCommissionsThroughIPMI(t *testing.T) {
	sim := startIPMISim(t)
	s := startStack(t, dev.StackOptions{RunWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := regionClient(s, "region-a")
	rack := s.Racks["rack-a"]
	cli, _ := adminCLI(t, s, s.Regions["region-a"].URL)
	pwFile := filepath.Join(t.TempDir(), "bmc-password")
	writeFile(t, pwFile, 0o600, sim.Password+"\n")
	before, err := a.Machines().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitRackWorker(ctx, t, s, rack.Uuid)
	add := []string{"machines", "add", "metal-bmc", "--power-type", "ipmi", "--power-address", sim.Addr, "--power-user", sim.User,
		"--power-password-file", pwFile, "--rack", rack.Uuid}

	out, err := cli(append(add, "--wait", "--timeout", "5s")...)
	if err == nil || !strings.Contains(out, "did not enlist within 5s") {
		t.Fatalf("add of a machine that never boots: %v: %s", err, out)
	}
	m, err := a.Machines().Get(ctx, "Name:metal-bmc")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != api.StatusFailedCommissioning || !strings.HasPrefix(m.StatusReason, "wait for enlistment and commissioning: ") || sim.on(t) || m.BMCAddress != "127.0.0.1" {
		t.Errorf("after the timeout: status %q (%q), BMC %q, ipmi_sim on: %v", m.Status, m.StatusReason, m.BMCAddress, sim.on(t))
	}
	if out, err := cli("machines", "list", "-o", "table"); err != nil || !strings.Contains(out, "STATUS") || !strings.Contains(out, api.StatusFailedCommissioning) {
		t.Errorf("machines list: %v: %s", err, out)
	}

	if out, err := cli("machines", "commission", "metal-bmc"); err != nil || !strings.Contains(out, "commission-machine/"+m.Uuid) {
		t.Fatalf("commission: %v: %s", err, out)
	}
	pollUntil(t, time.Minute, "the machine Commissioning and powered on", func() (bool, error) {
		got, err := a.Machines().Get(ctx, m.Uuid)
		return err == nil && got.Status == api.StatusCommissioning && sim.on(t), err
	})
	const mac = "52:54:00:c0:00:01"
	res, err := a.Enlist(ctx, api.Enlistment{
		Boot:          &api.BootFacts{MAC: mac, BuildArch: "x86_64"},
		Inventory:     &api.Inventory{Arch: "amd64", CPU: api.CPU{Count: 2}, MemoryMiB: 1024, BMCAddress: "127.0.0.1", Interfaces: []api.NetInterface{{Name: "eth0", MAC: mac}}},
		Commissioning: []api.CommissioningResult{{Script: "lscpu"}, {Script: "lsblk"}},
	})
	if err != nil || res.Machine != m.Uuid || res.Created {
		t.Fatalf("enlistment by the BMC address: %+v, %v; want machine %s", res, err, m.Uuid)
	}
	pollUntil(t, time.Minute, "the machine Ready and powered off", func() (bool, error) {
		got, err := a.Machines().Get(ctx, m.Uuid)
		return err == nil && got.Status == api.StatusReady && got.StatusReason == "" && !sim.on(t), err
	})
	after, err := a.Machines().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+1 {
		t.Errorf("%d machines before and %d after: want exactly the one added", len(before), len(after))
	}

	// The BMC powers one machine: a second one is refused and not left half-made.
	add[2] = "metal-bmc-2"
	if out, err := cli(add...); err == nil || !strings.Contains(out, "127.0.0.1 belongs to machine metal-bmc") {
		t.Errorf("a second machine on the same BMC: %v: %s", err, out)
	}
	if _, err := a.Machines().Get(ctx, "Name:metal-bmc-2"); !isStatus(err, http.StatusNotFound) {
		t.Errorf("the refused machine: %v, want 404", err)
	}
}
