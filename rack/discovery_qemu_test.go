package rack

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ironflow/ironflow/image/imagetest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

// discoveryBootTimeout bounds power-on to enlisted for a TCG machine (no KVM) booting
// Ironflow's discovery image on a loaded 2-core CI host; it took about 25 s here.
const discoveryBootTimeout = 3 * time.Minute

// TestQEMUMachineBootsTheDiscoveryImageAndEnlists: a QEMU machine the region does not know
// (2 CPUs, 512 MiB, an empty 1 GiB virtio disk) PXE-boots from the rack with QEMU's real
// iPXE, chains to the discovery image in the rack's boot dir (discovery/vmlinuz and
// initrd.img, built by the image package from Debian's kernel), whose init brings up the NIC
// by DHCP, sends its console to the rack's syslog, enlists with the rack named on its kernel
// command line, runs the region's commissioning script and powers the machine off. The region
// then has exactly one machine, Ready, with the VM's MAC, CPU count, memory and disk size,
// the script's output, and the image's console lines in its logs. It logs the times from
// power-on to each step.
func TestQEMUMachineBootsTheDiscoveryImageAndEnlists(t *testing.T) {
	const (
		mac  = "52:54:00:77:00:21"
		cpus = 2
		mib  = 512
		disk = 1 << 30
	)
	imagetest.Skip(t)
	boot := t.TempDir()
	imagetest.Build(t, filepath.Join(boot, "discovery"))
	diskFile := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(diskFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(diskFile, disk); err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(t.TempDir(), "console.log")

	v := newVethRack(t)
	v.syslogListen = v.serverIP.String() + ":514"
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	ctx := context.Background()
	if _, err := v.admin.CommissioningScripts().Create(ctx, api.CommissioningScript{Name: "cpus", Script: "grep -c ^processor /proc/cpuinfo"}); err != nil {
		t.Fatal(err)
	}
	v.start(t, func(o *Options) {
		o.RouterAdvertisements = true
		o.BootDir = boot
		o.Discovery = BootEnvBoot("discovery")
		// The test reads the console from the machine's serial port; syslog is the rack's.
		// bootQEMU gives the machine no first serial port: the second (ttyS1) is the file.
		o.Discovery.Cmdline = "console=ttyS1 ironflow.syslog=" + v.syslogListen
	})
	v.lease(t, net.HardwareAddr{0x02, 0, 0, 0x77, 0, 2}, "an address from the rack", func(ack *dhcpv4.DHCPv4) bool {
		return netip.MustParsePrefix("10.77.0.0/24").Contains(ackAddr(ack.YourIPAddr))
	})

	q := bootQEMU(t, v, mac, "-m", "512", "-smp", "2", "-serial", "file:"+console,
		"-drive", "file="+diskFile+",if=virtio,format=raw")
	// The steps as the console shows them, by the line that marks each.
	steps := []struct{ what, marker string }{
		{"kernel running the image's init", "ironflow: discovery image"},
		{"DHCP lease in the image", "ironflow: eth0: "},
		{"enlisted", "ironflow: enlisted"},
		{"powered off", "reboot: Power down"},
	}
	seen := map[string]time.Duration{}
	poweredOff := false
	testutil.EventuallyOK(t, discoveryBootTimeout, func() string {
		out, _ := os.ReadFile(console)
		for _, s := range steps {
			if _, ok := seen[s.what]; !ok && strings.Contains(string(out), s.marker) {
				seen[s.what] = time.Since(q.poweredOn)
			}
		}
		select {
		case err := <-q.exited:
			poweredOff = true
			q.exited <- err // for bootQEMU's cleanup
			if err != nil {
				t.Fatalf("QEMU exited with %v: %s\nconsole:\n%s", err, q.out.String(), out)
			}
		default:
		}
		if !poweredOff {
			return "the machine did not enlist and power off within " + discoveryBootTimeout.String() + "; console:\n" + string(out)
		}
		return ""
	})
	for _, s := range steps {
		t.Logf("discovery image on TCG: power-on to %s: %s", s.what, seen[s.what].Round(100*time.Millisecond))
	}

	ms, err := v.admin.Machines().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("%d machines after the boot, want 1: %+v", len(ms), ms)
	}
	m := ms[0]
	if m.Status != api.StatusReady || len(m.HardwareAddrs) != 1 || m.HardwareAddrs[0] != mac || m.Enlisted == nil || m.Enlisted.Inventory == nil {
		t.Fatalf("enlisted machine %+v, want Ready with MAC %s and an inventory", m, mac)
	}
	inv := m.Enlisted.Inventory
	if inv.CPU.Count != cpus || inv.MemoryMiB <= mib*8/10 || inv.MemoryMiB > mib {
		t.Errorf("inventory CPUs %d, memory %d MiB; want %d CPUs and at most %d MiB, less what the firmware keeps", inv.CPU.Count, inv.MemoryMiB, cpus, mib)
	}
	if len(inv.Disks) != 1 || inv.Disks[0].SizeBytes != disk {
		t.Errorf("inventory disks %+v, want one of %d bytes", inv.Disks, disk)
	}
	if len(inv.Interfaces) != 1 || inv.Interfaces[0].MAC != mac {
		t.Errorf("inventory interfaces %+v, want one with MAC %s", inv.Interfaces, mac)
	}
	if c := m.Enlisted.Commissioning; len(c) != 1 || c[0].ExitCode != 0 || strings.TrimSpace(c[0].Output) != "2" {
		t.Errorf("commissioning results %+v, want the script's exit 0 and output 2", c)
	}
	// The rack forwards syslog in batches: the last lines reach the region after the power-off.
	var all string
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		logs, err := v.admin.MachineLogs(ctx, m.Uuid, nil)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, l := range logs {
			texts = append(texts, l.Text)
		}
		if all = strings.Join(texts, "\n"); !strings.Contains(all, "enlisting with http://") {
			out, _ := os.ReadFile(console)
			return "the machine's logs do not hold the image's console up to its enlistment:\n" + all + "\nconsole:\n" + string(out)
		}
		return ""
	})
}
