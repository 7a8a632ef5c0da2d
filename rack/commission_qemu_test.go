package rack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/image/imagetest"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

// commissionTimeout bounds the commissioning of the TCG machine: its boot to powered off takes
// what discoveryBootTimeout allows, and the workflow polls the region up to a minute apart.
const commissionTimeout = 5 * time.Minute

// TestQEMUMachineAddedByItsBMCIsCommissioned: the operator declares a machine by its BMC
// only (a real ipmi_sim whose chassis power on starts a QEMU machine with an empty disk, and
// whose LAN address the machine reads in-band), as `ironflow machines add` does: the record
// with the BMC address, its IPMI power, a power grant and CommissionMachine on a real
// Temporal server, with the rack's real worker driving the BMC. The machine powers on, boots
// Ironflow's discovery image from the rack, enlists onto that record (matched by the BMC
// address), runs the region's two commissioning scripts, becomes Ready and is off as the
// rack's IPMI status says; the region holds exactly that one machine, with the VM's CPU
// count, memory, disk size and MAC in its inventory. It logs the time from the start to Ready.
func TestQEMUMachineAddedByItsBMCIsCommissioned(t *testing.T) {
	const (
		mac  = "52:54:00:77:00:31"
		cpus = 2
		mib  = 512
		disk = 1 << 30
	)
	imagetest.Skip(t)
	if _, err := temporalserver.FindCLI(); err != nil {
		t.Skipf("Temporal CLI not built: %v", err)
	}
	boot := t.TempDir()
	imagetest.Build(t, filepath.Join(boot, "discovery"))
	diskFile := filepath.Join(t.TempDir(), "disk.img")
	writeTestFile(t, diskFile, 0o644, "")
	if err := os.Truncate(diskFile, disk); err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(t.TempDir(), "console.log")

	ctx, cancel := context.WithTimeout(context.Background(), commissionTimeout+2*time.Minute)
	defer cancel()
	srv, err := temporalserver.Start(ctx, temporalserver.Options{UIPort: -1, Headless: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	tc, err := client.DialContext(ctx, client.Options{HostPort: srv.Address})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	w := workers.NewMigrationWorker(tc, nil)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	v := newVethRack(t)
	v.syslogListen = v.serverIP.String() + ":514"
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	for _, s := range []api.CommissioningScript{{Name: "cpus", Script: "grep -c ^processor /proc/cpuinfo"}, {Name: "disks", Script: "ls /sys/block"}} {
		if _, err := v.admin.CommissioningScripts().Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	v.start(t, func(o *Options) {
		o.RouterAdvertisements = true
		o.BootDir = boot
		o.Discovery = BootEnvBoot("discovery")
		o.Discovery.Cmdline = "console=ttyS1"
		o.Temporal = client.Options{HostPort: srv.Address}
		o.PowerPollInterval = -1
	})
	rack := v.vlan.PrimaryRack

	// The BMC: ipmi_sim in the machine's namespace, its LAN reached by the rack through a
	// forwarder on the host's loopback (the rack's worker dials from there); the machine reads
	// the same address in-band, as a real BMC's own.
	bmcIP := "127.0.0.1"
	pidFile := filepath.Join(t.TempDir(), "qemu.pid")
	qemu := qemuCommand(t, v, mac, "-m", fmt.Sprint(mib), "-smp", fmt.Sprint(cpus), "-serial", "file:"+console,
		"-drive", "file="+diskFile+",if=none,id=disk0,format=raw", "-device", "virtio-blk-pci,drive=disk0")
	startVM := filepath.Join(t.TempDir(), "start-vm.sh")
	inband := startInbandBMC(t, v, bmcIP, startVM)
	bmc := forwardUDP(t, v.cliNS, "127.0.0.1:9623")
	writeTestFile(t, startVM, 0o755, "#!/bin/sh\necho $$ > "+pidFile+"\nexec "+shellWords(append(qemu, inband...))+" >/dev/null 2>&1\n")
	t.Cleanup(func() { killPIDFile(t, pidFile) })

	// What `ironflow machines add metal-1 --power-type ipmi --power-address … --rack …` does.
	start := time.Now()
	m, err := v.admin.Machines().Create(ctx, api.Machine{Name: "metal-1", Rack: rack, BMCAddress: bmcIP, Status: api.StatusNew})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.admin.SetPower(ctx, m.Uuid, api.PowerConfig{Type: api.PowerTypeIPMI, Address: bmc, User: "ironflow", Password: "bmc-secret-1"}); err != nil {
		t.Fatal(err)
	}
	g, err := v.admin.IssueGrant(ctx, api.GrantRequest{Kind: api.GrantPower, Key: m.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	run, err := tc.ExecuteWorkflow(ctx, workflows.PodStartOptions(workflows.CommissionMachineID(m.Uuid)), workflows.CommissionMachine,
		workflows.CommissionMachineInput{Machine: m.Uuid, Rack: rack, Grant: g.Token, Timeout: commissionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.CommissionMachineResult
	if err := run.Get(ctx, &res); err != nil {
		out, _ := os.ReadFile(console)
		t.Fatalf("CommissionMachine: %v\nconsole:\n%s", err, out)
	}
	t.Logf("machine added by its BMC on TCG: start to Ready: %s", time.Since(start).Round(100*time.Millisecond))

	ms, err := v.admin.Machines().List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Uuid != m.Uuid {
		t.Fatalf("%d machines after the commissioning, want only metal-1: %+v", len(ms), ms)
	}
	got := ms[0]
	if res.Status != api.StatusReady || got.Status != api.StatusReady || got.Power == nil || got.Power.State != api.PowerStateOff {
		t.Fatalf("result %+v, machine status %q (%q), power %+v; want Ready and off", res, got.Status, got.StatusReason, got.Power)
	}
	inv := got.Enlisted.Inventory
	if inv.CPU.Count != cpus || inv.MemoryMiB <= mib*8/10 || inv.MemoryMiB > mib || len(inv.Disks) != 1 || inv.Disks[0].SizeBytes != disk ||
		len(inv.Interfaces) != 1 || inv.Interfaces[0].MAC != mac || inv.BMCAddress != bmcIP {
		t.Errorf("inventory %+v, want %d CPUs, at most %d MiB, one disk of %d bytes, MAC %s, BMC %s", inv, cpus, mib, disk, mac, bmcIP)
	}
	if c := got.Enlisted.Commissioning; len(c) != 2 || c[0].ExitCode != 0 || c[1].ExitCode != 0 {
		t.Errorf("commissioning results %+v, want both scripts' exit 0", c)
	}
}

// forwardUDP relays datagrams between a new socket on the host's loopback, whose address it
// returns, and target in network namespace ns: the replies go to the latest sender.
func forwardUDP(t *testing.T, ns, target string) string {
	t.Helper()
	outer, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var inner net.Conn
	netnstest.Run(t, ns, func() (err error) {
		inner, err = net.Dial("udp4", target)
		return err
	})
	var mu sync.Mutex
	var peer net.Addr
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, from, err := outer.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			peer = from
			mu.Unlock()
			inner.Write(buf[:n])
		}
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := inner.Read(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			mu.Lock()
			to := peer
			mu.Unlock()
			if err == nil && to != nil {
				outer.WriteTo(buf[:n], to)
			}
		}
	}()
	t.Cleanup(func() {
		outer.Close()
		inner.Close()
	})
	return outer.LocalAddr().String()
}

// shellWords quotes args for /bin/sh.
func shellWords(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}

// killPIDFile kills the process whose PID the file holds, if it is still there: the QEMU that
// ipmi_sim started, which outlives ipmi_sim.
func killPIDFile(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		return
	}
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
