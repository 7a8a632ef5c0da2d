package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/inventory"
	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// TestEnlistedMachineMigrates runs `ironflow agent enlist` on this host against region-a,
// where an operator declared the machine by one non-PXE MAC only: the region records this
// host's inventory and the commissioning output on that machine, which then migrates to
// region-b like any other, its enlistment and identities with it.
func TestEnlistedMachineMigrates(t *testing.T) {
	s := startStack(t, dev.StackOptions{RunWorker: true, NoRacks: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, b := regionClient(s, "region-a"), regionClient(s, "region-b")
	host, err := inventory.Gather(ctx, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(host.Interfaces) == 0 {
		t.Skip("this host has no network interface with a MAC")
	}
	declared, err := a.Machines().Create(ctx, api.Machine{Name: "declared", HardwareAddrs: []string{host.Interfaces[0].MAC}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CommissioningScripts().Create(ctx, api.CommissioningScript{Name: "kernel", Script: "uname -r"}); err != nil {
		t.Fatal(err)
	}

	var res api.EnlistResult
	runCLIJSON(t, s, &res, "agent", "enlist", "--url", s.Regions["region-a"].URL)
	if res.Created || res.Machine != declared.Uuid || res.Status != api.StatusReady {
		t.Fatalf("agent enlist printed %+v, want the declared machine %s, Ready", res, declared.Uuid)
	}
	m := getMachine(ctx, t, a, declared.Uuid)
	hostname, _ := os.Hostname()
	if m.Enlisted == nil || m.Enlisted.Inventory == nil || m.Enlisted.Inventory.Hostname != hostname ||
		len(m.Enlisted.Commissioning) != 1 || m.Enlisted.Commissioning[0].ExitCode != 0 {
		t.Fatalf("region-a recorded %+v", m.Enlisted)
	}
	cmd := exec.Command(buildIronflow(t), "-E", s.Regions["region-a"].URL, "machines", "inventory", "declared", "-o", "table")
	cmd.Env = append(os.Environ(), "IRONFLOW_TOKEN="+s.AdminToken)
	table, err := cmd.Output()
	if err != nil || !strings.Contains(string(table), "Hostname") || !strings.Contains(string(table), "Script kernel") {
		t.Fatalf("machines inventory (%v):\n%s", err, table)
	}

	migrate(ctx, t, s, workflows.MigrateMachineInput{SourceRegion: "region-a", TargetRegion: "region-b", Machine: "Name:declared"})
	assertActiveOnExactlyOne(ctx, t, s, declared.Uuid, "region-b")
	moved := getMachine(ctx, t, b, declared.Uuid)
	if moved.Status != api.StatusReady || string(mustJSON(t, moved.Enlisted)) != string(mustJSON(t, m.Enlisted)) {
		t.Fatalf("region-b holds %+v, want the enlistment of region-a %+v", moved.Enlisted, m.Enlisted)
	}
	// On region-b the moved machine is matched by its MACs like any machine enlisted there:
	// its iPXE report finds it, and it is not commissioned again unasked.
	again, err := b.Enlist(ctx, api.Enlistment{Boot: &api.BootFacts{MAC: host.Interfaces[0].MAC}})
	if err != nil || again.Machine != declared.Uuid || again.Created {
		t.Fatalf("booting again on region-b: %+v, %v", again, err)
	}
	if _, err := b.Enlist(ctx, api.Enlistment{Inventory: m.Enlisted.Inventory}); err == nil || !strings.Contains(err.Error(), "Ready already") {
		t.Fatalf("commissioning a Ready machine again: %v", err)
	}
}
