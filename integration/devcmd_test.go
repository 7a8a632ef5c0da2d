package integration

import (
	"bufio"
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

	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/internal/netnstest"
)

// TestDevStopsCleanly runs `ironflow dev` as a user does, interrupts it with SIGINT (Ctrl-C),
// and checks that it exits 0 leaving no process behind (its children, and the PostgreSQL
// server that pg_ctl detaches) and no network namespace.
func TestDevStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	bin := buildIronflow(t)
	// Not t.TempDir: its parent is private to root, and PostgreSQL runs as the postgres user.
	stateDir, err := os.MkdirTemp("", "ironflow-devcmd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { postgres.RemoveStateDir(stateDir) })
	namespacesBefore := netnsList(t)

	cmd := exec.Command(bin, "dev", "--state-dir", stateDir, "--free-ports")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	ready := make(chan bool, 1)
	var output strings.Builder
	var outputMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			outputMu.Lock()
			output.WriteString(sc.Text() + "\n")
			outputMu.Unlock()
			if strings.Contains(sc.Text(), "Ironflow is running.") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			outputMu.Lock()
			defer outputMu.Unlock()
			t.Fatalf("ironflow dev exited before it was ready:\n%s", output.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("ironflow dev not ready after 2 minutes")
	}

	// As root, PostgreSQL's data dir (in its command line) is outside the state dir.
	pgData, err := filepath.EvalSymlinks(filepath.Join(stateDir, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	started := stackProcesses(t, cmd.Process.Pid, stateDir, pgData)
	if len(started) < 3 { // ironflow dev, the Temporal dev server, PostgreSQL
		t.Fatalf("found only processes %v of the running stack", started)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ironflow dev after SIGINT: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ironflow dev still running a minute after SIGINT")
	}
	// Processes that are still exiting (their command line already gone) get a moment.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range started {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d (%s) survived ironflow dev", pid, cmdline(pid))
		}
	}
	if left := stackProcesses(t, -1, stateDir, pgData); len(left) > 0 {
		t.Errorf("processes still using the state dir: %v", left)
	}
	if appeared := newNamespaces(namespacesBefore, netnsList(t)); len(appeared) > 0 {
		t.Errorf("network namespaces left behind: %q", appeared)
	}
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
// beside this one: they come and go while the dev stack runs.
func newNamespaces(before, after string) []string {
	var out []string
	for _, name := range namespaceNames(after) {
		if !slices.Contains(namespaceNames(before), name) && !strings.HasPrefix(name, netnstest.TestPrefix) {
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
