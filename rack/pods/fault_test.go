package pods

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/ironflow/ironflow/dev/libvirtdtest"
	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/region/api"
)

// Procedure numbers of libvirt's remote protocol (remote_protocol.x), as they are on the wire.
const (
	procDomainGetXMLDesc     = 14
	procStoragePoolRefresh   = 83
	procStorageVolCreateXML  = 93
	procDomainDefineXMLFlags = 350
)

// onCall is a connection to libvirt that runs hook (once) just before it sends a call of
// procedure proc: a fault injected at a known step of an operation.
type onCall struct {
	net.Conn
	proc uint32
	hook func()
	once sync.Once
}

func (c *onCall) Write(b []byte) (int, error) {
	// go-libvirt flushes each packet, so a write starts with one: length, program, version,
	// procedure.
	if len(b) >= 16 && binary.BigEndian.Uint32(b[12:16]) == c.proc {
		c.once.Do(c.hook)
	}
	return c.Conn.Write(b)
}

// dialOnCall connects to the libvirtd at socket through an onCall.
func dialOnCall(t *testing.T, socket string, proc uint32, hook func()) *Conn {
	t.Helper()
	return dialOnCallWithin(t, socket, 10*time.Second, proc, hook)
}

// dialOnCallWithin is dialOnCall with the connection's timeout.
func dialOnCallWithin(t *testing.T, socket string, timeout time.Duration, proc uint32, hook func()) *Conn {
	t.Helper()
	nc, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	redial := func() (*Conn, error) { return DialUnix(socket, timeout) }
	conn, err := connect(&onCall{Conn: nc, proc: proc, hook: hook}, socket, timeout, nil, redial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestAHungLibvirtdDoesNotHangTheRack: a libvirtd that accepts connections but answers nothing
// (stopped) makes every call and every dial, over a socket or SSH, end within the timeout with
// an error that says so; the connection is closed then and refuses later calls at once, and
// nothing of it stays behind (goroutines).
func TestAHungLibvirtdDoesNotHangTheRack(t *testing.T) {
	p := startPod(t)
	s := sshTo(t, p.socket)
	const timeout = time.Second
	goroutines := runtime.NumGoroutine()
	vm := api.PodVM{Name: uniqueName(), Cores: 1, MemoryBytes: 64 << 20, Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 16 << 20}}, NIC: api.PodNIC{Bridge: "br0"}}
	calls := []struct {
		what string
		call func(*Conn) error
	}{
		{"discover", func(c *Conn) error { _, err := c.Discover(); return err }},
		{"compose", func(c *Conn) error { _, err := c.Compose(vm); return err }},
		{"decompose", func(c *Conn) error { return c.Decompose(vm.Name) }},
		{"power", func(c *Conn) error { return c.Power(vm.Name, api.PowerOn) }},
		{"power state", func(c *Conn) error { _, err := c.PowerState(vm.Name); return err }},
	}
	conns := make([]*Conn, len(calls))
	for i := range calls {
		c, err := DialUnix(p.socket, timeout)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	p.daemon.Pause()

	// bounded runs call and checks it failed in time, saying why.
	bounded := func(what string, call func() error) {
		t.Helper()
		start := time.Now()
		err := call()
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "did not answer within 1s") {
			t.Errorf("%s with a stopped libvirtd: %v, want it did not answer within 1s", what, err)
		}
		// The watchdog fires after the timeout; the rest is scheduling on a loaded host.
		if took > timeout+2*time.Second {
			t.Errorf("%s with a stopped libvirtd took %s, timeout %s", what, took, timeout)
		}
	}
	for i, c := range calls {
		bounded(c.what, func() error { return c.call(conns[i]) })
		start := time.Now()
		if err := c.call(conns[i]); err == nil || !strings.Contains(err.Error(), "connection was closed") || time.Since(start) > timeout/2 {
			t.Errorf("%s again on the closed connection: %v after %s, want an error at once", c.what, err, time.Since(start))
		}
		if err := conns[i].Close(); err != nil {
			t.Errorf("close after %s: %v", c.what, err)
		}
	}
	bounded("dial", func() error {
		c, err := DialUnix(p.socket, timeout)
		if err == nil {
			c.Close()
		}
		return err
	})
	bounded("dial over SSH", func() error {
		c, err := DialSSH(s, timeout)
		if err == nil {
			c.Close()
		}
		return err
	})
	testutil.Eventually(t, 10*time.Second, "the closed connections' goroutines gone", func() bool {
		return runtime.NumGoroutine() <= goroutines
	})
}

// TestDiscoverWhenLibvirtdDiesGivesNoFacts: libvirtd killed while Discover reads the pools (just
// before it refreshes one) makes Discover fail with no facts, never a part of them; once libvirtd
// is back, a new connection discovers everything.
func TestDiscoverWhenLibvirtdDiesGivesNoFacts(t *testing.T) {
	p := startPod(t)
	conn := dialOnCall(t, p.socket, procStoragePoolRefresh, p.daemon.Kill)
	facts, err := conn.Discover()
	if err == nil || !strings.Contains(err.Error(), "closed the connection") || !strings.Contains(err.Error(), "refresh storage pool "+p.pool) {
		t.Errorf("discover while libvirtd dies: %v, want that it closed the connection while the pool was refreshed", err)
	}
	if !reflect.DeepEqual(facts, Facts{}) {
		t.Errorf("discover while libvirtd dies returned facts: %+v", facts)
	}

	p.daemon.Restart()
	if _, err := conn.Discover(); err == nil || !strings.Contains(err.Error(), "closed the connection") {
		t.Errorf("discover on the connection to the dead libvirtd: %v, want that it was closed", err)
	}
	again, err := DialUnix(p.socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	facts, err = again.Discover()
	if err != nil {
		t.Fatal(err)
	}
	if facts.Cores < 1 || !slices.ContainsFunc(facts.StoragePools, func(sp StoragePool) bool {
		return sp.Name == p.pool && sp.Active && sp.CapacityBytes > 0
	}) {
		t.Errorf("discover after libvirtd restarted: %+v, want pool %s", facts, p.pool)
	}
}

// TestComposeWhenLibvirtdRestartsIsUndone: libvirtd restarting under a compose (its connection
// lost) as the domain is defined, once it was, or once the volumes were created too, leaves
// nothing: the compose is undone on a new connection.
func TestComposeWhenLibvirtdRestartsIsUndone(t *testing.T) {
	p := startPod(t)
	for _, c := range []struct {
		what string
		proc uint32
	}{
		{"nothing made", procDomainDefineXMLFlags},
		{"domain defined", procStorageVolCreateXML},
		{"domain and volumes made", procDomainGetXMLDesc},
	} {
		conn := dialOnCall(t, p.socket, c.proc, p.daemon.Restart)
		name := uniqueName()
		_, err := conn.Compose(api.PodVM{
			Name: name, Cores: 1, MemoryBytes: 64 << 20,
			Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 16 << 20}, {Pool: p.pool, SizeBytes: 16 << 20}},
			NIC:   api.PodNIC{Bridge: "br0"},
		})
		if err == nil || !strings.Contains(err.Error(), "closed the connection") {
			t.Errorf("%s, then libvirtd restarted: %v, want that it closed the connection", c.what, err)
		}
		// The pod's own connection is gone with the daemon: these dial again.
		if vols := libvirtdtest.Volumes(t, p.socket, p.pool); len(vols) != 0 {
			t.Errorf("%s, then libvirtd restarted: volumes left %v", c.what, vols)
		}
		if doms := libvirtdtest.Domains(t, p.socket); len(doms) != 0 {
			t.Errorf("%s, then libvirtd restarted: domains left %v", c.what, doms)
		}
	}
}

// TestComposeWhenLibvirtdHangsSaysWhatMayBeLeft: libvirtd stopping (answering nothing) just as
// the first volume is to be created ends the compose within the timeout twice over (the call,
// then the dial to undo it), and as nothing could remove what it made, the error names it.
func TestComposeWhenLibvirtdHangsSaysWhatMayBeLeft(t *testing.T) {
	p := startPod(t)
	const timeout = time.Second
	conn := dialOnCallWithin(t, p.socket, timeout, procStorageVolCreateXML, p.daemon.Pause)
	name := uniqueName()
	const id = "5e000000-0000-4000-8000-0000000000aa"
	start := time.Now()
	_, err := conn.Compose(api.PodVM{
		Name: name, UUID: id, Cores: 1, MemoryBytes: 64 << 20,
		Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 16 << 20}, {Pool: p.pool, SizeBytes: 16 << 20}},
		NIC:   api.PodNIC{Bridge: "br0"},
	})
	took := time.Since(start)
	left := "domain " + id + ", volumes [" + p.pool + "/" + name + "-disk0]"
	if err == nil || !strings.Contains(err.Error(), "did not answer within 1s") || !strings.Contains(err.Error(), left) {
		t.Errorf("compose as libvirtd stops: %v, want that it did not answer and what may be left: %s", err, left)
	}
	if took > 2*timeout+2*time.Second {
		t.Errorf("compose as libvirtd stops took %s, timeout %s", took, timeout)
	}
}

// TestAnUnreachablePodFailsFast: no daemon on the socket (no file, or a file nobody listens on),
// one that hangs up at once, and no SSH server on the port fail at once with an error that names
// where.
func TestAnUnreachablePodFailsFast(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale-sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	hangsUp := filepath.Join(dir, "hangs-up-sock")
	hl, err := net.Listen("unix", hangsUp)
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	go func() {
		for {
			c, err := hl.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	signer := sshdtest.NewSigner(t)

	for _, c := range []struct {
		what, want string
		dial       func() (*Conn, error)
	}{
		{"no socket", "connect to libvirt at " + filepath.Join(dir, "none") + ": dial unix", func() (*Conn, error) { return DialUnix(filepath.Join(dir, "none"), 10*time.Second) }},
		{"nobody on the socket", "connect to libvirt at " + stale + ": dial unix", func() (*Conn, error) { return DialUnix(stale, 10*time.Second) }},
		{"a daemon that hangs up", "connect: libvirt at " + hangsUp + " closed the connection", func() (*Conn, error) { return DialUnix(hangsUp, 10*time.Second) }},
		{"nobody on the SSH port", "pod ssh " + closedAddr + ": dial tcp", func() (*Conn, error) {
			return DialSSH(SSH{Addr: closedAddr, User: "root", Signer: signer, HostKey: sshdtest.AuthorizedLine(signer, "pod")}, 10*time.Second)
		}},
	} {
		start := time.Now()
		conn, err := c.dial()
		if err == nil {
			conn.Close()
			t.Errorf("%s: connected", c.what)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: failed after %s, want at once", c.what, took)
		}
	}
}

// TestComposeRefusesNamesThePodHas: a VM named as a domain the pod has (defined outside
// Ironflow), or whose disk is named as a volume the pool has (known to libvirt or only written
// into its directory), is refused before anything is created, and what was there stays.
func TestComposeRefusesNamesThePodHas(t *testing.T) {
	p := startPod(t)
	vm := func(name string) api.PodVM {
		return api.PodVM{Name: name, Cores: 1, MemoryBytes: 64 << 20, Disks: []api.PodDisk{{Pool: p.pool, SizeBytes: 16 << 20}, {Pool: p.pool, SizeBytes: 16 << 20}}, NIC: api.PodNIC{Bridge: "br0"}}
	}

	taken := uniqueName()
	existing := p.defineDomain(t, taken)
	if _, err := p.conn.Compose(vm(taken)); err == nil || !strings.Contains(err.Error(), "the pod has a domain named "+taken+" already") {
		t.Errorf("compose onto a domain's name: %v", err)
	}
	if vols := p.volumes(t); len(vols) != 0 {
		t.Errorf("volumes created: %v", vols)
	}
	p.wantDomain(t, existing)

	// The VM's second disk clashes: its first is not created either.
	volClash := uniqueName()
	sp, err := p.conn.lv.StoragePoolLookupByName(p.pool)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := (&libvirtxml.StorageVolume{Name: volClash + "-disk1", Capacity: &libvirtxml.StorageVolumeSize{Value: 1 << 20}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.conn.lv.StorageVolCreateXML(sp, doc, 0); err != nil {
		t.Fatal(err)
	}
	// A file written into the pool's directory, which libvirt knows of only after a refresh.
	fileClash := uniqueName()
	if err := os.WriteFile(filepath.Join(p.poolDir, fileClash+"-disk0"), []byte("not Ironflow's"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{volClash, fileClash} {
		clash := name + "-disk1"
		if name == fileClash {
			clash = name + "-disk0"
		}
		_, err := p.conn.Compose(vm(name))
		if err == nil || !strings.Contains(err.Error(), "has a volume named "+clash+" already") {
			t.Errorf("compose onto volume %s: %v", clash, err)
		}
		if p.hasDomain(t, name) {
			t.Errorf("compose onto volume %s defined the domain", clash)
		}
	}
	want := []string{volClash + "-disk1", fileClash + "-disk0"}
	slices.Sort(want)
	if vols := p.volumes(t); !slices.Equal(vols, want) {
		t.Errorf("pool volumes %v, want only the two there before: %v", vols, want)
	}
	if b, err := os.ReadFile(filepath.Join(p.poolDir, fileClash+"-disk0")); err != nil || string(b) != "not Ironflow's" {
		t.Errorf("the file in the pool: %q, %v", b, err)
	}
}

// TestASilentSSHServerIsBounded: a pod whose SSH port accepts connections but never speaks (a
// hung sshd) fails the dial within the timeout: ssh.Dial bounds only the TCP connect.
func TestASilentSSHServerIsBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c // held open, silent, until the test ends
		}
	}()
	t.Cleanup(func() {
		select {
		case c := <-accepted:
			c.Close()
		default:
		}
	})
	signer := sshdtest.NewSigner(t)
	const timeout = time.Second
	start := time.Now()
	conn, err := DialSSH(SSH{Addr: l.Addr().String(), User: "root", Signer: signer, HostKey: sshdtest.AuthorizedLine(signer, "pod")}, timeout)
	if err == nil {
		conn.Close()
		t.Fatal("connected to a silent SSH server")
	}
	if !strings.Contains(err.Error(), "timeout") {
		t.Errorf("dial of a silent SSH server: %v, want a timeout", err)
	}
	if took := time.Since(start); took > timeout+2*time.Second {
		t.Errorf("dial of a silent SSH server took %s, timeout %s", took, timeout)
	}
}
