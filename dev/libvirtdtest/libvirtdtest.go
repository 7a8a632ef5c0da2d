// Package libvirtdtest runs a real libvirtd for a test: its sockets, config and PID file in a
// directory of the test, stopped by its PID when the test ends. As root it runs libvirt's system
// instance (qemu:///system), so its domains and networks live in /etc/libvirt: tests give them
// names of their own and remove them.
package libvirtdtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"libvirt.org/go/libvirtxml"

	"github.com/ironflow/ironflow/internal/testutil"
)

// Path is where Debian's libvirt-daemon installs libvirtd.
const Path = "/usr/sbin/libvirtd"

// Start runs libvirtd with its files in dir and returns its read-write socket once it accepts
// connections; the test is skipped when libvirtd is not installed or the test is not root.
func Start(t testing.TB, dir string) (socket string) {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		t.Skipf("libvirtd not installed (%s missing): apt-get install libvirt-daemon-system", Path)
	}
	if os.Geteuid() != 0 {
		t.Skip("libvirtd tests run libvirt's system instance: they need root")
	}
	config := filepath.Join(dir, "libvirtd.conf")
	// No authentication on the sockets: only this host's root reaches the test's directory.
	err := os.WriteFile(config, fmt.Appendf(nil, "unix_sock_dir = %q\nauth_unix_rw = \"none\"\nauth_unix_ro = \"none\"\n", dir), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var log testutil.SafeBuffer
	cmd := exec.Command(Path, "--config", config, "--pid-file", filepath.Join(dir, "libvirtd.pid"))
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGTERM)
		<-exited
		if t.Failed() {
			t.Logf("libvirtd log:\n%s", log.String())
		}
	})
	socket = filepath.Join(dir, "libvirt-sock")
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		select {
		case <-exited:
			t.Fatalf("libvirtd exited before it listened:\n%s", log.String())
		default:
		}
		c, err := net.Dial("unix", socket)
		if err != nil {
			return fmt.Sprintf("libvirtd does not listen on %s: %v\n%s", socket, err, log.String())
		}
		c.Close()
		return ""
	})
	return socket
}

// DirPool creates a transient dir storage pool named name on the daemon at socket, its files in
// dir (created): it is gone with the daemon, nothing is left in /etc/libvirt/storage.
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

func connect(t testing.TB, socket string) *libvirt.Libvirt {
	t.Helper()
	lv := libvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(socket)))
	if err := lv.ConnectToURI(libvirt.QEMUSystem); err != nil {
		t.Fatalf("connect to libvirtd at %s: %v", socket, err)
	}
	return lv
}
