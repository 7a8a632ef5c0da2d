// Package libvirtdtest runs a real libvirtd for a test, able to start QEMU (TCG) domains: libvirt's
// system instance (qemu:///system) with virtlogd beside it, both in a mount namespace of their own
// where the test's directory stands in for /etc/libvirt, /run/libvirt, /var/lib/libvirt and
// /var/log/libvirt. So each test has its own qemu.conf (QEMU as root, no security driver, no
// cgroups: a test directory and a container are enough), and its domains, pools and networks are
// gone with it, whatever another libvirtd on the host holds. The daemons see no /dev/kvm (an empty
// read-only file stands there), so domains run under TCG as the tests expect: a host may offer a /dev/kvm on
// which a nested guest hangs in its firmware (seen on the CI kind of machine: SeaBIOS stops after
// its option-ROM scan and the VM never sends a DHCP request). /var/cache/libvirt is the test's too,
// since libvirt's cache of what it probed in the QEMU binaries would still say KVM works; Run
// waits for that probe, seconds under load, so a test's own call timeouts do not include it.
// Every process (libvirtd, virtlogd, the QEMU of a running domain) is ended by its PID when the
// test ends.
package libvirtdtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"libvirt.org/go/libvirtxml"

	"github.com/ironflow/ironflow/internal/testutil"
)

// Path is where Debian's libvirt-daemon installs libvirtd; virtlogd is beside it.
const (
	Path         = "/usr/sbin/libvirtd"
	VirtlogdPath = "/usr/sbin/virtlogd"
)

// The host directories the daemons see as the test's own (the test directory's subdirectory of
// the same base name, e.g. dir/run for /run/libvirt).
var private = map[string]string{
	"etc": "/etc/libvirt", "run": "/run/libvirt", "lib": "/var/lib/libvirt", "log": "/var/log/libvirt",
	"cache": "/var/cache/libvirt",
}

// kvmDevice is hidden from the daemons (see the package comment).
const kvmDevice = "/dev/kvm"

// probeTimeout bounds libvirtd's first probe of the QEMU binaries on a loaded 2-core host.
const probeTimeout = 3 * time.Minute

// qemuConf lets QEMU run as root on files in a test's directory: no security driver or dynamic
// ownership (there is no AppArmor profile or libvirt-qemu user to hand them to), no cgroups or
// mount namespace per domain (a container may not allow them).
const qemuConf = `user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
`

// Start runs libvirtd (and virtlogd) with its files in dir and returns its read-write socket once
// it accepts connections; the test is skipped when libvirtd is not installed or the test is not root.
func Start(t testing.TB, dir string) (socket string) {
	t.Helper()
	return StartInNetNS(t, dir, "")
}

// StartInNetNS is Start with the daemons in the network namespace netns (made by the test, which
// removes it after this package's cleanup ran): its domains' NICs (taps) join bridges there. An
// empty netns is the test's own namespace.
func StartInNetNS(t testing.TB, dir, netns string) (socket string) {
	t.Helper()
	return Run(t, dir, netns).Socket
}

// Libvirtd is a test's libvirtd, for tests of what a client does when it fails.
type Libvirtd struct {
	Socket string

	t               testing.TB
	dir, netns, etc string
	daemon          daemon
}

// Run is StartInNetNS that returns the daemon, to stop, kill or restart.
func Run(t testing.TB, dir, netns string) *Libvirtd {
	t.Helper()
	for _, p := range []string{Path, VirtlogdPath} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("libvirtd not installed (%s missing): apt-get install libvirt-daemon-system", p)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("libvirtd tests run libvirt's system instance: they need root")
	}
	for sub := range private {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	etc := filepath.Join(dir, "etc")
	// No authentication on the sockets: only this host's root reaches the test's directory.
	files := map[string]string{
		"libvirtd.conf": fmt.Sprintf("unix_sock_dir = %q\nauth_unix_rw = \"none\"\nauth_unix_ro = \"none\"\n", dir),
		"qemu.conf":     qemuConf,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The QEMU of the domains still running are ended first (libvirtd does not end them when it
	// stops), then libvirtd, then virtlogd, which their logs go through: cleanups run last first.
	// Their PID files are the test's: the default ones (/run/*.pid) are locked by the first of
	// them on the host.
	virtlogd := start(t, dir, netns, "virtlogd", VirtlogdPath, "--pid-file", filepath.Join(dir, "virtlogd.pid"))
	waitListening(t, virtlogd, filepath.Join(dir, "run", "virtlogd-sock"))
	t.Cleanup(func() { killDomains(t, dir) })
	l := &Libvirtd{Socket: filepath.Join(dir, "libvirt-sock"), t: t, dir: dir, netns: netns, etc: etc}
	l.start()
	return l
}

func (l *Libvirtd) start() {
	l.t.Helper()
	l.daemon = start(l.t, l.dir, l.netns, "libvirtd", Path, "--config", filepath.Join(l.etc, "libvirtd.conf"), "--pid-file", filepath.Join(l.dir, "libvirtd.pid"))
	waitListening(l.t, l.daemon, l.Socket)
	waitProbed(l.t, l.Socket)
}

// waitProbed waits until libvirtd answers its capabilities, which it knows once it has probed
// the QEMU binaries, and fails the test if they still offer KVM.
func waitProbed(t testing.TB, socket string) {
	t.Helper()
	lv := connect(t, socket)
	defer lv.Disconnect()
	type answer struct {
		doc []byte
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		doc, err := lv.Capabilities()
		if err == nil {
			// What a domain definition asks first; computed once per emulator and machine.
			_, err = lv.ConnectGetDomainCapabilities(nil, libvirt.OptString{"x86_64"}, nil, libvirt.OptString{"qemu"}, 0)
		}
		answered <- answer{doc, err}
	}()
	var doc []byte
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("libvirtd at %s did not report its capabilities: %v", socket, a.err)
		}
		doc = a.doc
	case <-time.After(probeTimeout):
		t.Fatalf("libvirtd at %s has not reported its capabilities within %s", socket, probeTimeout)
	}
	if strings.Contains(string(doc), "<domain type='kvm'") {
		t.Fatalf("libvirtd at %s offers KVM with %s hidden: its domains would not run under TCG", socket, kvmDevice)
	}
}

// Pause stops libvirtd (SIGSTOP): it still accepts connections (the kernel queues them) but
// answers nothing. It is continued when the test ends, before it is ended.
func (l *Libvirtd) Pause() {
	l.daemon.signal(syscall.SIGSTOP)
	d := l.daemon
	l.t.Cleanup(func() { d.signal(syscall.SIGCONT) })
}

// Kill kills libvirtd (SIGKILL), as a crash would, and waits until it is gone; its domains' QEMU
// run on.
func (l *Libvirtd) Kill() {
	l.daemon.signal(syscall.SIGKILL)
	<-l.daemon.exited
}

// Restart kills libvirtd if it runs and starts it again on the same directories (its persistent
// and running objects are read back from them), once it accepts connections.
func (l *Libvirtd) Restart() {
	l.t.Helper()
	l.Kill()
	l.start()
}

// daemon is a process start started.
type daemon struct {
	name   string
	pid    int
	exited chan struct{}
	log    *testutil.SafeBuffer
}

// start runs the program in a new mount namespace with the test's directories bound over
// libvirt's, in netns when not empty, and ends it by its PID (every step execs the next: the
// PID is the program's) when the test ends.
func start(t testing.TB, dir, netns, name string, program ...string) daemon {
	t.Helper()
	var binds []string
	for sub, target := range private {
		// The target may be missing on a host without libvirt-daemon-system; made once, it stays empty.
		binds = append(binds, fmt.Sprintf("mkdir -p %[2]s && mount --bind %[1]s %[2]s", shellQuote(filepath.Join(dir, sub)), target))
	}
	if _, err := os.Stat(kvmDevice); err == nil {
		// An empty regular file, read-only: libvirt's own check (write access, which a read-only
		// mount refuses to root for a regular file but not for a device) then agrees with what
		// its probe of QEMU found. A writable stand-in such as /dev/null makes libvirt take its
		// probe for stale and probe QEMU again on every call: seconds per call.
		noKVM := filepath.Join(dir, "no-kvm")
		if err := os.WriteFile(noKVM, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		binds = append(binds, fmt.Sprintf("mount --bind %[1]s %[2]s && mount -o remount,bind,ro %[2]s", shellQuote(noKVM), kvmDevice))
	}
	args := append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-ec", strings.Join(binds, "\n") + "\nexec \"$@\"", name}, program...)
	if netns != "" {
		args = append([]string{"ip", "netns", "exec", netns}, args...)
	}
	d := daemon{name: name, exited: make(chan struct{}), log: &testutil.SafeBuffer{}}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = d.log, d.log
	// Killed with the test process too, should it die before its cleanups run (a test timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	d.pid = cmd.Process.Pid
	go func() { cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			d.signal(syscall.SIGKILL)
			<-d.exited
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, d.log.String())
		}
	})
	return d
}

// signal sends sig to the daemon unless it exited (its PID may be another process's by now).
// The window between the check and the kill is the test's own: it reaps the daemon.
func (d daemon) signal(sig syscall.Signal) {
	select {
	case <-d.exited:
	default:
		syscall.Kill(d.pid, sig)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// waitListening waits until the daemon accepts connections on its unix socket.
func waitListening(t testing.TB, d daemon, socket string) {
	t.Helper()
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		select {
		case <-d.exited:
			t.Fatalf("%s exited before it listened:\n%s", d.name, d.log.String())
		default:
		}
		c, err := net.Dial("unix", socket)
		if err != nil {
			return fmt.Sprintf("%s does not listen on %s: %v\n%s", d.name, socket, err, d.log.String())
		}
		c.Close()
		return ""
	})
}

// killDomains ends the QEMU process of every domain still running, by the PID libvirtd wrote,
// and waits until it is gone (QEMU is not this process's child: a zombie nobody reaps is gone).
func killDomains(t testing.TB, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "run", "qemu", "*.pid"))
	for _, f := range files {
		if filepath.Base(f) == "driver.pid" { // libvirtd's own lock of the driver
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the domain stopped meanwhile
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			t.Errorf("QEMU pid file %s: %q", f, b)
			continue
		}
		syscall.Kill(pid, syscall.SIGKILL)
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("QEMU %d (%s) gone", pid, f), func() bool { return !alive(pid) })
	}
}

// alive reports whether pid runs: it exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')', comm may hold anything.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// DirPool creates a transient dir storage pool named name on the daemon at socket, its files in
// dir (created): it is gone with the daemon.
func DirPool(t testing.TB, socket, name, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	doc, err := (&libvirtxml.StoragePool{Type: "dir", Name: name, Target: &libvirtxml.StoragePoolTarget{Path: dir}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	lv := connect(t, socket)
	defer lv.Disconnect()
	if _, err := lv.StoragePoolCreateXML(doc, 0); err != nil {
		t.Fatalf("create storage pool %s: %v", name, err)
	}
}

// Volumes lists the names of the volumes in the pool, refreshed first.
func Volumes(t testing.TB, socket, pool string) []string {
	t.Helper()
	lv := connect(t, socket)
	defer lv.Disconnect()
	p, err := lv.StoragePoolLookupByName(pool)
	if err == nil {
		err = lv.StoragePoolRefresh(p, 0)
	}
	if err != nil {
		t.Fatalf("storage pool %s: %v", pool, err)
	}
	vols, _, err := lv.StoragePoolListAllVolumes(p, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(vols))
	for i, v := range vols {
		names[i] = v.Name
	}
	return names
}

// Domains lists the names of every domain the daemon has, defined or running.
func Domains(t testing.TB, socket string) []string {
	t.Helper()
	lv := connect(t, socket)
	defer lv.Disconnect()
	doms, _, err := lv.ConnectListAllDomains(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(doms))
	for i, d := range doms {
		names[i] = d.Name
	}
	return names
}

func connect(t testing.TB, socket string) *libvirt.Libvirt {
	t.Helper()
	lv := libvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(socket)))
	if err := lv.ConnectToURI(libvirt.QEMUSystem); err != nil {
		t.Fatalf("connect to libvirtd at %s: %v", socket, err)
	}
	return lv
}

// DomainReport says what a domain of the daemon in dir at socket did, for a test that failed
// waiting for it: its state, what each NIC sent and received (libvirt counts from the domain's
// side) and the end of QEMU's log. A VM that sent nothing never got past its firmware.
func DomainReport(t testing.TB, dir, socket, name string) string {
	t.Helper()
	lv := connect(t, socket)
	defer lv.Disconnect()
	var b strings.Builder
	fmt.Fprintf(&b, "domain %s:", name)
	dom, err := lv.DomainLookupByName(name)
	if err != nil {
		fmt.Fprintf(&b, " %v\n", err)
		return b.String()
	}
	if state, reason, err := lv.DomainGetState(dom, 0); err == nil {
		fmt.Fprintf(&b, " state %d (reason %d; 1 is running)", state, reason)
	}
	doc, err := lv.DomainGetXMLDesc(dom, 0)
	var x libvirtxml.Domain
	if err == nil {
		err = x.Unmarshal(doc)
	}
	if err == nil && x.Devices != nil {
		for _, nic := range x.Devices.Interfaces {
			if nic.Target == nil {
				continue
			}
			_, rxPackets, _, _, _, txPackets, _, _, err := lv.DomainInterfaceStats(dom, nic.Target.Dev)
			if err != nil {
				fmt.Fprintf(&b, "; NIC %s: %v", nic.Target.Dev, err)
				continue
			}
			fmt.Fprintf(&b, "; NIC %s sent %d packets, received %d", nic.Target.Dev, txPackets, rxPackets)
		}
	}
	const tail = 4 << 10
	qemuLog, _ := os.ReadFile(filepath.Join(dir, "log", "qemu", name+".log"))
	if len(qemuLog) > tail {
		qemuLog = qemuLog[len(qemuLog)-tail:]
	}
	fmt.Fprintf(&b, "\nQEMU log (end):\n%s\n", qemuLog)
	return b.String()
}
