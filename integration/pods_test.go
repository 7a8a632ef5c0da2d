package integration

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/libvirtdtest"
	"github.com/ironflow/ironflow/dev/sshdtest"
	"github.com/ironflow/ironflow/rack/pods"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/workflows"
)

// podHost is a real libvirtd with a dir storage pool, behind a real sshd that forwards its
// socket to the rack's key, as a pod host reached with qemu+ssh.
type podHost struct {
	socket, pool, poolDir string
	sshd                  *sshdtest.Server
	rackKey               string // the rack's private key file
}

func startPodHost(t *testing.T) podHost {
	t.Helper()
	dir := t.TempDir()
	h := podHost{socket: libvirtdtest.Start(t, dir), pool: fmt.Sprintf("ironflow-it-%d", time.Now().UnixNano()), poolDir: filepath.Join(dir, "pool")}
	libvirtdtest.DirPool(t, h.socket, h.pool, h.poolDir)
	h.sshd = sshdtest.Start(t, dir)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "rack")
	if err != nil {
		t.Fatal(err)
	}
	h.rackKey = filepath.Join(dir, "rack_key")
	if err := os.WriteFile(h.rackKey, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(h.sshd.KeysFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.sshd.KeysFile, []byte(sshdtest.AuthorizedLine(signer, "rack")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// hasDomain says whether the host has a domain named name.
func (h podHost) hasDomain(t *testing.T, name string) bool {
	t.Helper()
	conn, err := pods.DialUnix(h.socket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.Existing(name)
	return err == nil
}

// adminCLI runs the CLI against the region at url with the stack's admin token: cli returns
// its output, mustCLI decodes its JSON output into out and fails the test on an error.
func adminCLI(t *testing.T, s *dev.Stack, url string) (cli func(args ...string) (string, error), mustCLI func(out any, args ...string)) {
	cli = func(args ...string) (string, error) {
		t.Helper()
		return runCLIAs(t, s, s.AdminToken, append([]string{"-E", url}, args...)...)
	}
	mustCLI = func(out any, args ...string) {
		t.Helper()
		text, err := cli(append(args, "-o", "json")...)
		if err != nil {
			t.Fatalf("ironflow %v: %v\n%s", args, err, text)
		}
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("ironflow %v printed %q: %v", args, text, err)
		}
	}
	return cli, mustCLI
}

// removeOnCleanup decomposes the VM name when the test ends, if a failed test left it (the
// system instance keeps domains in /etc/libvirt).
func (h podHost) removeOnCleanup(t *testing.T, name string) {
	t.Cleanup(func() {
		if conn, err := pods.DialUnix(h.socket, 10*time.Second); err == nil {
			conn.Decompose(name)
			conn.Close()
		}
	})
}

// TestPodsDrivenByTheRack runs pods through the rack on a real stack (region, rack with its
// worker, Temporal, the migration worker) and a real libvirtd: the CLI adds a local and a
// qemu+ssh pod, refreshes them, composes and decomposes a VM on each, powers one through the
// rack; the rack refreshes its pods on its schedule; a readonly token changes nothing, a
// wrong host key is refused, an unreachable pod keeps its facts, a composed machine is not
// deleted alone and a rack that hosts pods not without force.
func TestPodsDrivenByTheRack(t *testing.T) {
	h := startPodHost(t)
	s := startStack(t, dev.StackOptions{RunWorker: true, PodSSHKey: h.rackKey, PodRefreshInterval: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := regionClient(s, "region-a")
	rack := s.Racks["rack-a"]
	aURL := s.Regions["region-a"].URL
	cli, mustCLI := adminCLI(t, s, aURL)
	local := "qemu:///system?socket=" + h.socket
	overSSH := "qemu+ssh://root@" + h.sshd.Addr + "/system?socket=" + h.socket

	// The rack refreshes its pods on its own schedule.
	var pod api.Pod
	mustCLI(&pod, "pods", "add", "kvm-scheduled", "--type", "virsh", "--address", local, "--rack", "rack-a")
	pollUntil(t, 30*time.Second, "the rack's scheduled refresh of kvm-scheduled", func() (bool, error) {
		p, err := a.Pods().Get(ctx, pod.Uuid)
		return p.Arch != "" && len(p.StoragePools) > 0, err
	})
	if out, err := cli("pods", "delete", pod.Uuid); err != nil {
		t.Fatalf("delete kvm-scheduled: %v: %s", err, out)
	}

	mustCLI(&pod, "pods", "add", "kvm-local", "--type", "virsh", "--address", local, "--rack", "rack-a")
	if pod.Rack != rack.Uuid {
		t.Fatalf("pod added %+v, want on rack-a %s", pod, rack.Uuid)
	}
	waitRackWorker(ctx, t, s, rack.Uuid)
	mustCLI(&pod, "pods", "refresh", "kvm-local")
	i := slices.IndexFunc(pod.StoragePools, func(sp api.PodStoragePool) bool { return sp.Name == h.pool })
	if i < 0 || pod.Arch == "" || pod.Cores < 1 {
		t.Fatalf("refreshed pod %+v: want the pool %s", pod, h.pool)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(h.poolDir, &st); err != nil {
		t.Fatal(err)
	}
	if got, want := pod.StoragePools[i].CapacityBytes, st.Blocks*uint64(st.Frsize); got != want {
		t.Errorf("pool capacity %d, statfs of %s says %d", got, h.poolDir, want)
	}

	// A readonly token composes nothing and starts no workflow.
	if _, err := a.Users().Create(ctx, api.User{Name: "viewer", Role: api.RoleReadonly}); err != nil {
		t.Fatal(err)
	}
	ro, err := a.MintToken(ctx, "viewer", api.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	denied := fmt.Sprintf("ironflow-it-ro-%d", time.Now().UnixNano())
	out, err := runCLIAs(t, s, ro.Token, "-E", aURL, "pods", "compose", "kvm-local", "--name", denied, "--memory", "128M", "--storage", h.pool+":1G", "--bridge", "br0")
	if err == nil || !strings.Contains(out, "operator or admin") || !strings.Contains(out, "403") {
		t.Fatalf("readonly compose: %v: %s", err, out)
	}
	if _, err := s.Client.DescribeWorkflowExecution(ctx, workflows.PodComposeID(pod.Uuid, denied), ""); err == nil {
		t.Error("the readonly compose started a workflow")
	}
	// A start that bypasses the CLI needs a grant for this very pod too: without one, or with
	// another pod's, the rack refuses before it touches the hypervisor.
	otherPod, err := a.Pods().Create(ctx, api.Pod{Name: "kvm-other", Rack: rack.Uuid})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"", grant(ctx, t, s, "region-a", api.GrantRequest{Kind: api.GrantPod, Key: otherPod.Uuid})} {
		in := workflows.PodComposeInput{PodTarget: workflows.PodTarget{Pod: pod.Uuid, Rack: rack.Uuid, Grant: g},
			VM: api.PodVM{Name: denied, Cores: 1, MemoryBytes: 128 << 20, Disks: []api.PodDisk{{Pool: h.pool, SizeBytes: 1 << 30}}, NIC: api.PodNIC{Bridge: "br0"}}}
		run, err := s.Client.ExecuteWorkflow(ctx, workflows.PodStartOptions(workflows.PodComposeID(pod.Uuid, denied)), workflows.PodCompose, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); err == nil || !strings.Contains(err.Error(), "GrantRefused") {
			t.Errorf("compose with grant %q: %v, want GrantRefused", g, err)
		}
	}
	if h.hasDomain(t, denied) {
		t.Error("a refused compose defined a domain")
	}

	for _, c := range []struct{ pod, address, hostKey string }{
		{"kvm-local", local, ""},
		{"kvm-ssh", overSSH, h.sshd.HostKey},
	} {
		if c.pod == "kvm-ssh" {
			mustCLI(&pod, "pods", "add", c.pod, "--type", "virsh", "--address", c.address, "--host-key", c.hostKey, "--rack", rack.Uuid)
			mustCLI(&pod, "pods", "refresh", c.pod)
			if !slices.ContainsFunc(pod.StoragePools, func(sp api.PodStoragePool) bool { return sp.Name == h.pool }) {
				t.Fatalf("pod %s refreshed over SSH: %+v", c.pod, pod.StoragePools)
			}
		}
		name := fmt.Sprintf("ironflow-it-%d", time.Now().UnixNano())
		var m api.Machine
		mustCLI(&m, "pods", "compose", c.pod, "--name", name, "--cores", "1", "--memory", "128M", "--storage", h.pool+":1G", "--bridge", "br0")
		h.removeOnCleanup(t, name)
		if m.Name != name || m.Pod != pod.Uuid || m.Rack != rack.Uuid || len(m.HardwareAddrs) != 1 || m.Fingerprint.SystemUUID != m.Uuid || m.Status != api.StatusNew {
			t.Fatalf("%s: declared machine %+v", c.pod, m)
		}
		if vols := libvirtdtest.Volumes(t, h.socket, h.pool); !slices.Equal(vols, []string{name + "-disk0"}) {
			t.Errorf("%s: pool volumes %v", c.pod, vols)
		}
		if got, err := a.Pods().Get(ctx, pod.Uuid); err != nil || !slices.Equal(got.VMs, []string{m.Uuid}) {
			t.Errorf("%s: pod VMs %v (%v), want the machine", c.pod, got.VMs, err)
		}
		// The VM is defined, not started: off changes nothing, through the rack.
		if out, err := cli("machines", "power", "off", m.Uuid); err != nil || !strings.Contains(out, "Machine "+name+" is off") {
			t.Errorf("%s: power off: %v: %s", c.pod, err, out)
		}
		if out, err := cli("machines", "delete", m.Uuid); err == nil || !strings.Contains(out, "--decompose") {
			t.Errorf("%s: delete of a composed machine: %v: %s", c.pod, err, out)
		}
		if out, err := cli("pods", "decompose", c.pod, m.Uuid); err != nil {
			t.Fatalf("%s: decompose: %v: %s", c.pod, err, out)
		}
		if vols := libvirtdtest.Volumes(t, h.socket, h.pool); len(vols) != 0 || h.hasDomain(t, name) {
			t.Errorf("%s: left after decompose: volumes %v, domain %v", c.pod, vols, h.hasDomain(t, name))
		}
		if _, err := a.Machines().Get(ctx, m.Uuid); err == nil {
			t.Errorf("%s: machine %s left after decompose", c.pod, name)
		}
		if got, _ := a.Pods().Get(ctx, pod.Uuid); len(got.VMs) != 0 {
			t.Errorf("%s: pod VMs after decompose %v", c.pod, got.VMs)
		}
	}

	// Another host key is refused, and the pod keeps no facts.
	impostor := sshdtest.AuthorizedLine(sshdtest.NewSigner(t), "impostor")
	mustCLI(&pod, "pods", "add", "kvm-impostor", "--type", "virsh", "--address", overSSH, "--host-key", impostor, "--rack", "rack-a")
	if out, err := cli("pods", "refresh", "kvm-impostor"); err == nil || !strings.Contains(out, "host key does not match") {
		t.Errorf("refresh with the wrong host key: %v: %s", err, out)
	}
	if got, err := a.Pods().Get(ctx, "Name:kvm-impostor"); err != nil || got.Arch != "" || len(got.StoragePools) != 0 {
		t.Errorf("pod with the wrong host key: %+v (%v), want no facts", got, err)
	}

	// libvirtd unreachable: the refresh fails saying so, after its retries, and the facts of
	// the last refresh stay.
	before, err := a.Pods().Get(ctx, "Name:kvm-local")
	if err != nil {
		t.Fatal(err)
	}
	gone := "qemu:///system?socket=" + filepath.Join(t.TempDir(), "gone")
	if _, err := a.Pods().Patch(ctx, before.Uuid, []byte(fmt.Sprintf(`{"PowerAddress": %q}`, gone))); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("pods", "refresh", "kvm-local"); err == nil || !strings.Contains(out, "connect to libvirt") {
		t.Errorf("refresh of an unreachable pod: %v: %s", err, out)
	}
	// Usage figures may differ (the rack's schedule refreshes too, and the filesystem's use
	// moves); the facts themselves must all be there.
	sameFacts := func(x, y api.PodStoragePool) bool {
		return x.Name == y.Name && x.Path == y.Path && x.CapacityBytes == y.CapacityBytes && x.AvailableBytes > 0 && y.AvailableBytes > 0
	}
	after, err := a.Pods().Get(ctx, before.Uuid)
	if err != nil || after.Arch != before.Arch || after.Cores != before.Cores || !slices.EqualFunc(after.StoragePools, before.StoragePools, sameFacts) ||
		len(after.Networks) != len(before.Networks) {
		t.Errorf("facts after a failed refresh: %+v (%v), want those before: %+v", after, err, before)
	}

	// A pod whose rack runs no worker is refused at once, not left waiting.
	idle, err := a.Racks().Create(ctx, api.Rack{Name: "rack-idle"})
	if err != nil {
		t.Fatal(err)
	}
	mustCLI(&pod, "pods", "add", "kvm-idle", "--type", "virsh", "--address", local, "--rack", idle.Uuid)
	if out, err := cli("pods", "refresh", "kvm-idle"); err == nil || !strings.Contains(out, "runs no worker") {
		t.Errorf("refresh of a pod whose rack runs no worker: %v: %s", err, out)
	}

	// A rack still refuses to be deleted while it serves pods.
	if out, err := cli("racks", "delete", "rack-a"); err == nil || !strings.Contains(out, "pod kvm-local") {
		t.Errorf("delete of a rack with pods: %v: %s", err, out)
	}
}
