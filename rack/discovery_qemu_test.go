package rack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ironflow/ironflow/image/imagetest"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

// discoveryBootTimeout bounds power-on to powered off for a TCG machine (no KVM) booting
// Ironflow's discovery image on a loaded 2-core CI host: 15–17 s here, 46 s while other
// tests built images alongside.
const discoveryBootTimeout = 3 * time.Minute

// TestQEMUMachineBootsTheDiscoveryImageAndEnlists: a QEMU machine the region does not know
// (2 CPUs, 512 MiB, an empty 1 GiB virtio disk with a serial, a BMC: a real ipmi_sim it reaches in-band
// through its KCS interface) PXE-boots from the rack with QEMU's real
// iPXE, chains to the discovery image in the rack's boot dir (discovery/vmlinuz and
// initrd.img, built by the image package from Debian's kernel), whose init brings up the NIC
// by DHCP, sends its console to the rack's syslog, enlists with the rack named on its kernel
// command line, runs the region's commissioning script and powers the machine off. The region
// then has exactly one machine, Ready, with the VM's MAC, CPU count, memory, disk size and serial, the
// BMC's LAN address as the machine read it in-band,
// the script's output, and the image's console lines in its logs. It logs the times from
// power-on to each step.
func TestQEMUMachineBootsTheDiscoveryImageAndEnlists(t *testing.T) {
	const (
		mac        = "52:54:00:77:00:21"
		cpus       = 2
		mib        = 512
		disk       = 1 << 30
		bmcAddr    = "10.77.1.10" // the BMC's LAN address, as its LAN configuration reports it
		diskSerial = "ironflow-disk-1"
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
		// The test reads the console from the machine's serial port (bootQEMU gives it no
		// first one: the second, ttyS1, is the file); the rack adds its syslog address.
		o.Discovery.Cmdline = "console=ttyS1"
	})
	v.lease(t, net.HardwareAddr{0x02, 0, 0, 0x77, 0, 2}, "an address from the rack", func(ack *dhcpv4.DHCPv4) bool {
		return netip.MustParsePrefix("10.77.0.0/24").Contains(ackAddr(ack.YourIPAddr))
	})

	q := bootQEMU(t, v, mac, append([]string{"-m", "512", "-smp", "2", "-serial", "file:" + console,
		"-drive", "file=" + diskFile + ",if=none,id=disk0,format=raw", "-device", "virtio-blk-pci,drive=disk0,serial=" + diskSerial}, startInbandBMC(t, v, bmcAddr, "")...)...)
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
	// The kernel started its own uptime before it ran init: what came before is the firmware,
	// iPXE's DHCP and enlistment report, and the download of the image.
	out, _ := os.ReadFile(console)
	if uptime, ok := initUptime(string(out)); ok {
		t.Logf("discovery image on TCG: power-on to kernel started (firmware, iPXE, download): %s", (seen[steps[0].what] - uptime).Round(100*time.Millisecond))
	}
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
	if len(inv.Disks) != 1 || inv.Disks[0].SizeBytes != disk || inv.Disks[0].Serial != diskSerial {
		t.Errorf("inventory disks %+v, want one of %d bytes with serial %s", inv.Disks, disk, diskSerial)
	}
	if inv.BMCAddress != bmcAddr {
		t.Errorf("inventory BMC address %q, want %s (read in-band through /dev/ipmi0)", inv.BMCAddress, bmcAddr)
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

// initUptime is the kernel's uptime when it ran /init, from its "[ 1.234567] Run /init as
// init process" console line.
func initUptime(console string) (time.Duration, bool) {
	for line := range strings.Lines(console) {
		stamp, ok := strings.CutSuffix(strings.TrimSpace(line), "] Run /init as init process")
		if !ok {
			continue
		}
		secs, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(stamp, "[")), 64)
		return time.Duration(secs * float64(time.Second)), err == nil
	}
	return 0, false
}

// startInbandBMC starts a real OpenIPMI ipmi_sim in the machine's namespace as the machine's
// BMC (IPMI over LAN on 127.0.0.1:9623 there, user ironflow, password bmc-secret-1), its LAN
// configuration reporting address lanAddr, and returns the QEMU arguments that connect it to
// the machine's KCS interface (what the kernel's ipmi_si finds). With a startCmd, a chassis
// power on runs it (with /bin/sh -c) to start the machine, and a power off stops it. It skips
// the test without ipmi_sim (Debian package openipmi).
func startInbandBMC(t *testing.T, v *vethRack, lanAddr, startCmd string) []string {
	t.Helper()
	bin, err := exec.LookPath("ipmi_sim")
	if err != nil {
		t.Skip("skipping: ipmi_sim is not installed (apt-get install openipmi)")
	}
	const serialPort = 9002 // in the machine's own namespace, on its loopback
	netnstest.IP(t, "-n", v.cliNS, "link", "set", "lo", "up")
	dir := t.TempDir()
	lanConfig := filepath.Join(dir, "lan-config.sh")
	// ipmi_sim runs it as `lan-config.sh <device> get <param>...`, one "param:value" line each.
	writeTestFile(t, lanConfig, 0o755, `#!/bin/sh
[ "$2" = get ] || exit 0
shift 2
for p in "$@"; do
	case $p in
	ip_addr) echo ip_addr:`+lanAddr+` ;;
	ip_addr_src) echo ip_addr_src:static ;;
	subnet_mask) echo subnet_mask:255.255.255.0 ;;
	mac_addr) echo mac_addr:02:00:00:77:01:10 ;;
	default_gw_ip_addr | backup_gw_ip_addr) echo $p:0.0.0.0 ;;
	default_gw_mac_addr | backup_gw_mac_addr) echo $p:00:00:00:00:00:00 ;;
	esac
done
`)
	power := ""
	if startCmd != "" {
		power = fmt.Sprintf("  startcmd %q\n  startnow false\n  poweroff_wait 10\n  kill_wait 5\n", startCmd)
	}
	writeTestFile(t, filepath.Join(dir, "lan.conf"), 0o644, fmt.Sprintf(`name "ironflow-vm"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 9623
    priv_limit admin
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
    lan_config_program "%s eth0"
  endlan
  serial 15 127.0.0.1 %d codec VM
%s  user 2 true "ironflow" "bmc-secret-1" admin 10 none md2 md5 straight
`, lanConfig, serialPort, power))
	writeTestFile(t, filepath.Join(dir, "cmds.emu"), 0o644, "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n")
	out := &lockedBuffer{}
	cmd := exec.Command("ip", "netns", "exec", v.cliNS, bin, "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "cmds.emu"), "-n", "-s", filepath.Join(dir, "state"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ipmi_sim: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // ip netns exec execs ipmi_sim: this PID is ipmi_sim's
		cmd.Wait()
		if t.Failed() {
			t.Logf("ipmi_sim output:\n%s", out.String())
		}
	})
	// QEMU connects, and reconnects, to ipmi_sim's VM serial port itself.
	return []string{"-chardev", fmt.Sprintf("socket,id=ipmi0,host=127.0.0.1,port=%d,reconnect=1", serialPort),
		"-device", "ipmi-bmc-extern,chardev=ipmi0,id=bmc0", "-device", "isa-ipmi-kcs,bmc=bmc0"}
}

func writeTestFile(t *testing.T, path string, mode os.FileMode, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}
