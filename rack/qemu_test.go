package rack

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/rack/httpboot"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/store"
)

const (
	// qemuBootTimeout bounds the power-on-to-script time the test waits for: a TCG machine
	// (no KVM) on a loaded 2-core CI host.
	qemuBootTimeout = 60 * time.Second
	// qemuMaxBoot is the boot time the test accepts: about 3 s here (SeaBIOS and the iPXE ROM
	// under TCG), over 20 s when iPXE waits for IPv6 routers and ProxyDHCP offers.
	qemuMaxBoot = 12 * time.Second
)

// lockedBuffer is QEMU's output: written by exec's copying goroutine, read by the test
// when it fails.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// qemuMachine is a QEMU machine powered on by bootQEMU.
type qemuMachine struct {
	poweredOn time.Time
	exited    chan error // QEMU's exit; it is killed when the test ends
	out       *lockedBuffer
}

// failed reports why QEMU exited early.
func (q *qemuMachine) failed(t *testing.T, err error) {
	t.Helper()
	if strings.Contains(q.out.String(), "tap") {
		t.Fatalf("QEMU could not open its tap device: %v: %s", err, q.out.String())
	}
	t.Fatalf("QEMU exited before running the boot script: %v: %s", err, q.out.String())
}

// bootQEMU powers on a real QEMU machine (TCG: no KVM needed) whose virtio NIC, with MAC
// mac, boots with QEMU's iPXE ROM on a tap bridged to the client end of v's veth pair;
// extra are further QEMU arguments. It skips the test when QEMU is not installed.
func bootQEMU(t *testing.T, v *vethRack, mac string, extra ...string) *qemuMachine {
	t.Helper()
	args := append([]string{"netns", "exec", v.cliNS}, qemuCommand(t, v, mac, extra...)...)
	q := &qemuMachine{exited: make(chan error, 1), out: &lockedBuffer{}}
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = q.out, q.out
	q.poweredOn = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start QEMU: %v", err)
	}
	go func() { q.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill() // ip netns exec execs QEMU: this PID is QEMU's
		<-q.exited
	})
	return q
}

// qemuCommand is the command line of a QEMU machine as bootQEMU starts it, to run in v's
// client namespace, whose tap bridged to the veth pair it creates. It skips the test when
// QEMU is not installed.
func qemuCommand(t *testing.T, v *vethRack, mac string, extra ...string) []string {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("skipping: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
	}
	for _, args := range [][]string{
		{"link", "add", "br0", "type", "bridge"},
		{"tuntap", "add", "dev", "tap0", "mode", "tap"},
		{"link", "set", v.cliIf, "master", "br0"},
		{"link", "set", "tap0", "master", "br0"},
		{"link", "set", "tap0", "up"},
		{"link", "set", "br0", "up"},
	} {
		netnstest.IP(t, append([]string{"-n", v.cliNS}, args...)...)
	}
	return append([]string{qemu,
		"-machine", "pc,accel=tcg", "-m", "64", "-smp", "1", "-nodefaults", "-display", "none", "-serial", "none",
		"-boot", "n", "-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=" + mac}, extra...)
}

// TestQEMUIPXEBoot powers on a real QEMU machine whose NIC boots with QEMU's iPXE ROM, on
// the client side of the veth pair, and measures the time from power-on until iPXE runs the
// machine script the rack serves (its kernel line reaches a probe server). The machine gets
// its address from the rack by broadcast DHCP, is sent straight to the HTTP boot script (it
// is iPXE already) and told not to wait for ProxyDHCP offers, and the rack answers its IPv6
// router solicitations, so iPXE does not wait for IPv6 either.
func TestQEMUIPXEBoot(t *testing.T) {
	v := newVethRack(t)
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})

	// The kernel of the discovery environment is on a probe server in the rack's namespace:
	// its first request is iPXE running the machine script.
	scriptRan := make(chan time.Time, 1)
	var probe net.Listener
	netnstest.Run(t, v.rackNS, func() (err error) {
		probe, err = net.Listen("tcp", v.serverIP.String()+":8080")
		return err
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case scriptRan <- time.Now():
		default:
		}
		http.Error(w, "probe only", http.StatusNotFound)
	})}
	go srv.Serve(probe)
	t.Cleanup(func() { srv.Close() })
	v.start(t, func(o *Options) {
		o.RouterAdvertisements = true
		o.Discovery = httpboot.Boot{BootEnv: "probe", Kernel: "http://" + probe.Addr().String() + "/vmlinuz"}
	})
	// Ready when a client on the link gets an address: the rack has its config.
	v.lease(t, net.HardwareAddr{0x02, 0, 0, 0x77, 0, 2}, "an address from the rack", func(ack *dhcpv4.DHCPv4) bool {
		return netip.MustParsePrefix("10.77.0.0/24").Contains(ackAddr(ack.YourIPAddr))
	})

	q := bootQEMU(t, v, "52:54:00:77:00:10")
	select {
	case at := <-scriptRan:
		took := at.Sub(q.poweredOn)
		t.Logf("QEMU iPXE machine: power-on to boot script in %s", took.Round(10*time.Millisecond))
		if took > qemuMaxBoot {
			t.Errorf("power-on to boot script took %s, want at most %s: does iPXE wait for IPv6 routers or ProxyDHCP offers?", took, qemuMaxBoot)
		}
	case err := <-q.exited:
		q.failed(t, err)
	case <-time.After(qemuBootTimeout):
		t.Fatalf("no boot script ran within %s of power-on (QEMU output: %q)", qemuBootTimeout, q.out.String())
	}
}

// TestQEMUUnknownMachineEnlists: a QEMU machine the region does not know PXE-boots from the
// rack with QEMU's real iPXE, runs the enlistment script, and the region ends up with exactly
// one New machine carrying QEMU's MAC and the SMBIOS facts QEMU reports: strings with
// characters a URL must escape, and QEMU's defaults (no UUID, no serial, a product name with
// a comma and a "+").
func TestQEMUUnknownMachineEnlists(t *testing.T) {
	const (
		mac    = "52:54:00:77:00:11"
		serial = "SN 42/a&b=c+d%e#f?g"
	)
	tests := []struct {
		name   string
		smbios []string // QEMU arguments; its option syntax doubles commas, and no value has one
		want   api.BootFacts
		// The identities the region keeps: a placeholder UUID and an empty serial identify nothing.
		systemUUID, ssnHash string
	}{
		{"SMBIOS strings a URL must escape",
			[]string{"-smbios", "type=1,uuid=8d2e6a3c-1b7f-4e0a-9c55-0a1b2c3d4e5f,serial=" + serial + ",manufacturer=Ironflow Test & Co.,product=Rack Unit 1/2 (QEMU)"},
			api.BootFacts{UUID: "8d2e6a3c-1b7f-4e0a-9c55-0a1b2c3d4e5f", Serial: serial, Manufacturer: "Ironflow Test & Co.", Product: "Rack Unit 1/2 (QEMU)"},
			"8d2e6a3c-1b7f-4e0a-9c55-0a1b2c3d4e5f", store.SSNHash(serial)},
		{"QEMU's defaults", nil,
			api.BootFacts{UUID: "00000000-0000-0000-0000-000000000000", Manufacturer: "QEMU", Product: "Standard PC (i440FX + PIIX, 1996)"},
			"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newEnlistingRack(t)
			q := bootQEMU(t, v, mac, tt.smbios...)

			var ms []api.Machine
			testutil.EventuallyOK(t, qemuBootTimeout, func() string {
				select {
				case err := <-q.exited:
					q.failed(t, err)
				default:
				}
				var err error
				if ms, err = v.admin.Machines().List(context.Background(), nil); err != nil {
					t.Fatal(err)
				}
				if len(ms) == 0 {
					return "no machine enlisted within " + qemuBootTimeout.String() + " of power-on (QEMU output: " + q.out.String() + ")"
				}
				return ""
			})
			t.Logf("QEMU iPXE machine: power-on to enlisted in %s", time.Since(q.poweredOn).Round(10*time.Millisecond))
			if len(ms) != 1 {
				t.Fatalf("%d machines after the boot, want 1: %+v", len(ms), ms)
			}
			m := ms[0]
			if m.Status != api.StatusNew || m.Stage != api.EnlistStage || len(m.HardwareAddrs) != 1 || m.HardwareAddrs[0] != mac ||
				m.Fingerprint.SystemUUID != tt.systemUUID || m.Fingerprint.SSNHash != tt.ssnHash {
				t.Fatalf("enlisted machine %+v, want Status New in %s with MAC %s, SMBIOS UUID %q and serial hash %q",
					m, api.EnlistStage, mac, tt.systemUUID, tt.ssnHash)
			}
			// QEMU's ROM is a BIOS iPXE, built for i386 on this x86_64 machine: the region
			// leaves Arch to the inventory.
			want := tt.want
			want.MAC, want.BuildArch, want.Platform, want.Rack = mac, "i386", "pcbios", m.Rack
			if m.Enlisted == nil || m.Enlisted.Boot == nil || *m.Enlisted.Boot != want || m.Arch != "" {
				t.Fatalf("enlisted Arch %q, boot facts %+v, want Arch unset and %+v", m.Arch, m.Enlisted.Boot, want)
			}
		})
	}
}

// newEnlistingRack is a veth rack serving 10.77.0.0/24 (a dynamic range), router
// advertisements for iPXE and the discovery environment unknown machines enlist from, with its
// config applied (a client of the link got an address).
func newEnlistingRack(t *testing.T) *vethRack {
	t.Helper()
	v := newVethRack(t)
	v.subnet(t, "10.77.0.0/24", "", api.IPRange{Start: "10.77.0.100", End: "10.77.0.200"})
	v.start(t, func(o *Options) {
		o.RouterAdvertisements = true
		o.Discovery = httpboot.Boot{BootEnv: "discovery", Kernel: "http://" + v.serverIP.String() + ":1/vmlinuz"}
	})
	v.lease(t, net.HardwareAddr{0x02, 0, 0, 0x77, 0, 2}, "an address from the rack", func(ack *dhcpv4.DHCPv4) bool {
		return netip.MustParsePrefix("10.77.0.0/24").Contains(ackAddr(ack.YourIPAddr))
	})
	return v
}
