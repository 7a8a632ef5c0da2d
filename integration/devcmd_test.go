package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/internal/netnstest"
	"github.com/ironflow/ironflow/internal/testutil"
)

// TestDevStopsCleanly runs `ironflow dev` as a user does; a second `dev --fresh` on its state
// dir must be refused before it touches anything, so the first still answers with its token
// and its data. Then it interrupts the first with SIGINT (Ctrl-C), checks that it exits 0
// leaving no process behind (its children, and the PostgreSQL server that pg_ctl detaches)
// and no network namespace, and that `dev --teardown` leaves no file.
func TestDevStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	bin := buildIronflow(t)
	// A private parent, like a clone in root's home: the stack must cope.
	parent := t.TempDir()
	stateDir := filepath.Join(parent, ".ironflow-dev")
	t.Cleanup(func() { postgres.RemoveStateDir(stateDir) })
	namespacesBefore := netnsList(t)

	first := startDev(t, bin, stateDir)
	token, regionA := first.bannerValue(t, "admin token"), first.bannerValue(t, "region-a API")
	pgData := filepath.Join(stateDir, "postgres")
	started := stackProcesses(t, first.cmd.Process.Pid, stateDir)
	if len(started) < 3 { // ironflow dev, the Temporal dev server, PostgreSQL
		t.Fatalf("found only processes %v of the running stack", started)
	}
	started = append(started, postmasterPID(t, pgData))

	t.Run("every rack service in the banner answers there", func(t *testing.T) { rackServicesAnswer(t, first) })

	t.Run("second dev --fresh leaves the running stack alone", func(t *testing.T) {
		// Bounded: a second stack that starts instead of refusing would run until killed.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		second := exec.CommandContext(ctx, bin, "dev", "--fresh", "--free-ports", "--state-dir", stateDir)
		second.WaitDelay = 5 * time.Second
		out, err := second.CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("a second dev --fresh on a running stack's state dir succeeded:\n%s", out)
		}
		for _, want := range []string{"is running", strconv.Itoa(first.cmd.Process.Pid), stateDir} {
			if !strings.Contains(string(out), want) {
				t.Errorf("the refusal does not name %q:\n%s", want, out)
			}
		}
		show := exec.Command(bin, "-E", regionA, "machines", "show", "Name:birdy")
		show.Env = append(os.Environ(), "IRONFLOW_TOKEN="+token)
		if out, err := show.CombinedOutput(); err != nil || !strings.Contains(string(out), "birdy") {
			t.Errorf("the first stack no longer answers with its token and data: %v\n%s", err, out)
		}
	})

	if err := first.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ironflow dev after SIGINT: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ironflow dev still running a minute after SIGINT")
	}
	// Processes that are still exiting (their command line already gone) get a moment.
	if complaint := testutil.Poll(10*time.Second, func() string {
		var survivors []string
		for _, pid := range started {
			if alive(pid) {
				survivors = append(survivors, fmt.Sprintf("%d (%s)", pid, cmdline(pid)))
			}
		}
		if survivors != nil {
			return "processes survived ironflow dev: " + strings.Join(survivors, ", ")
		}
		return ""
	}); complaint != "" {
		t.Error(complaint)
	}
	if left := stackProcesses(t, -1, stateDir); len(left) > 0 {
		t.Errorf("processes still using the state dir: %v", left)
	}
	if appeared := newNamespaces(namespacesBefore, netnsList(t), dev.RackLinkNetnsPrefix(stateDir)); len(appeared) > 0 {
		t.Errorf("network namespaces left behind: %q", appeared)
	}

	if out, err := exec.Command(bin, "dev", "--teardown", "--state-dir", stateDir).CombinedOutput(); err != nil {
		t.Fatalf("dev --teardown: %v\n%s", err, out)
	}
	if entries, err := os.ReadDir(parent); err != nil || len(entries) > 0 {
		t.Errorf("left after dev --teardown: %v %v", entries, err)
	}
}

// devProcess is a running `ironflow dev` and what it printed.
type devProcess struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	output strings.Builder
}

// startDev starts `ironflow dev` on free ports and returns once its banner is out.
func startDev(t *testing.T, bin, stateDir string) *devProcess {
	t.Helper()
	d := &devProcess{cmd: exec.Command(bin, "dev", "--state-dir", stateDir, "--free-ports")}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.cmd.Stdout
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			_ = d.cmd.Wait()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.mu.Lock()
			d.output.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			// The banner's last line.
			if strings.Contains(sc.Text(), "Ctrl-C stops everything") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("ironflow dev exited before it was ready:\n%s", d.printed())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("ironflow dev not ready after 2 minutes")
	}
	return d
}

func (d *devProcess) printed() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.output.String()
}

// bannerValue is what the banner prints after label, on the label's line.
func (d *devProcess) bannerValue(t *testing.T, label string) string {
	t.Helper()
	for _, line := range strings.Split(d.printed(), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), label); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("the banner has no %q line:\n%s", label, d.printed())
	return ""
}

// postmasterPID reads the PostgreSQL server's PID from its data dir.
func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	return pid
}

// stackProcesses lists root (unless -1), its descendants, and every process whose command
// line names one of dirs (pg_ctl detaches the PostgreSQL server from its parent).
func stackProcesses(t *testing.T, root int, dirs ...string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name in stat is parenthesised and may hold spaces: fields follow the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			parent[pid], _ = strconv.Atoi(fields[1])
		}
		pids = append(pids, pid)
	}
	var out []int
	for _, pid := range pids {
		if pid == root || descends(pid, root, parent) || slices.ContainsFunc(dirs, func(dir string) bool { return strings.Contains(cmdline(pid), dir) }) {
			out = append(out, pid)
		}
	}
	return out
}

func descends(pid, root int, parent map[int]int) bool {
	for p := parent[pid]; p > 1 && root > 0; p = parent[p] {
		if p == root {
			return true
		}
	}
	return false
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// A zombie has exited; only its parent has not collected it yet.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) == 0 || fields[0] != "Z"
}

// newNamespaces lists the namespaces of after (`ip netns list` output) that before lacks,
// other than those internal/netnstest makes for tests of other packages, which go test runs
// beside this one, and the rack links of dev stacks on other state dirs than the one whose
// namespaces begin with own: they come and go while the dev stack runs.
func newNamespaces(before, after, own string) []string {
	var out []string
	for _, name := range namespaceNames(after) {
		otherStack := strings.HasPrefix(name, "ironflow-dev-") && !strings.HasPrefix(name, own)
		if !slices.Contains(namespaceNames(before), name) && !strings.HasPrefix(name, netnstest.TestPrefix) && !otherStack {
			out = append(out, name)
		}
	}
	return out
}

// namespaceNames reads the names of `ip netns list` output ("name (id: 3)" lines).
func namespaceNames(list string) []string {
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if name, _, _ := strings.Cut(strings.TrimSpace(line), " "); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func netnsList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Skipf("ip netns list: %v: %s", err, out)
	}
	return string(out)
}
