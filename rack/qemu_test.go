package rack

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/rack/httpboot"
	"github.com/ironflow/ironflow/region/api"
)

const (
	// qemuBootTimeout bounds the power-on-to-script time the test waits for: a TCG machine
	// (no KVM) on a loaded 2-core CI host.
	qemuBootTimeout = 60 * time.Second
	// qemuMaxBoot is the boot time the test accepts: about 3 s here (SeaBIOS and the iPXE ROM
	// under TCG), over 20 s when iPXE waits for IPv6 routers and ProxyDHCP offers.
	qemuMaxBoot = 12 * time.Second
)

// TestQEMUIPXEBoot powers on a real QEMU machine (TCG: no KVM needed) whose NIC boots with
// QEMU's iPXE ROM, on the client side of the veth pair, and measures the time from power-on
// until iPXE runs the machine script the rack serves (its kernel line reaches a probe server).
// The machine gets its address from the rack by broadcast DHCP, is sent straight to the HTTP
// boot script (it is iPXE already) and told not to wait for ProxyDHCP offers, and the rack
// answers its IPv6 router solicitations, so iPXE does not wait for IPv6 either.
func TestQEMUIPXEBoot(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("skipping: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
	}
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

	// The machine's NIC is a tap on a bridge with the client end of the veth pair.
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

	ctx, cancel := context.WithTimeout(context.Background(), qemuBootTimeout+10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", v.cliNS, qemu,
		"-machine", "pc,accel=tcg", "-m", "64", "-smp", "1", "-nodefaults", "-display", "none", "-serial", "none",
		"-boot", "n", "-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:77:00:10")
	cmd.Stdout, cmd.Stderr = &out, &out
	poweredOn := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start QEMU: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	select {
	case at := <-scriptRan:
		took := at.Sub(poweredOn)
		t.Logf("QEMU iPXE machine: power-on to boot script in %s", took.Round(10*time.Millisecond))
		if took > qemuMaxBoot {
			t.Errorf("power-on to boot script took %s, want at most %s: does iPXE wait for IPv6 routers or ProxyDHCP offers?", took, qemuMaxBoot)
		}
	case err := <-exited:
		if strings.Contains(out.String(), "tap") {
			t.Fatalf("QEMU could not open its tap device: %v: %s", err, out.String())
		}
		t.Fatalf("QEMU exited before running the boot script: %v: %s", err, out.String())
	case <-time.After(qemuBootTimeout):
		t.Fatalf("no boot script ran within %s of power-on (QEMU output: %q)", qemuBootTimeout, out.String())
	}
}
