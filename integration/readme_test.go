package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/workflows"
)

// TestReadmeFromAFreshClone does what the README and docs/ tell a new user, in the order
// written: it clones the working tree into a private (0700) directory, as a clone in root's
// home, runs `make dev` there with the default state dir (on free ports,
// IRONFLOW_DEV_FREE_PORTS=1), and runs every ```sh and ```console block of the clone's
// README.md, then of the files docs/README.md lists, in its order, each against the stack the
// one before left, through bash, the real CLI and the real Temporal CLI. A console block's
// output must be what the docs show (timestamps, ports and the UUIDs a stack makes aside); the
// other commands must exit 0, and the ones that move machines must move some (docsChecks).
// Then it interrupts make like Ctrl-C does, runs the blocks meant for a stopped stack (its
// teardown), and checks nothing is left running and nothing was written outside the clone,
// PostgreSQL's data included.
func TestReadmeFromAFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs make dev in a fresh clone")
	}
	temporalCLI, err := temporalserver.FindCLI()
	if err != nil {
		t.Fatal(err)
	}
	clone := cloneWorkingTree(t)
	// make builds the Temporal CLI only when bin/temporal is missing: reuse the built one.
	if err := os.Symlink(temporalCLI, filepath.Join(clone, "bin", "temporal")); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(clone, ".ironflow-dev")
	t.Cleanup(func() { postgres.RemoveStateDir(stateDir) })
	// Whatever uses the temp dir writes here, so the test can see what is left.
	tmp, err := os.MkdirTemp("", "ironflow-readme-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	outsideBefore := outsideEntries(t)

	md := startMakeDev(t, clone, tmp)
	started := stackProcesses(t, md.cmd.Process.Pid, clone)
	addrs, err := dev.ReadStackFile(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	r := newDocsRunner(t, clone, md, addrs, tmp)
	var afterStop []docsCommand
	for _, file := range docsFiles(t, clone) {
		for _, b := range readDocsBlocks(t, clone, file) {
			if b.afterStop {
				afterStop = append(afterStop, b.commands...)
				continue
			}
			for _, c := range b.commands {
				r.run(c)
			}
		}
	}
	for _, c := range docsChecks {
		if !r.seen[c] {
			t.Errorf("no docs command matches %q: the docs lost that example", c.cmd)
		}
	}

	md.interrupt(t)
	waitGone(t, started)
	if left := stackProcesses(t, -1, clone); len(left) > 0 {
		t.Errorf("processes still running after Ctrl-C: %v", left)
	}
	for _, c := range afterStop {
		r.run(c)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("left in the temp dir: %v", entries)
	}
	for _, e := range outsideEntries(t) {
		if !slices.Contains(outsideBefore, e) {
			t.Errorf("written outside the clone: %s", e)
		}
	}
	if err := postgres.RemoveStateDir(stateDir); err != nil {
		t.Fatal(err)
	}
}

// docsChecks are what the docs' commands that move machines must print (real work), and the
// commands whose output shows what a stack does on its own time, read again until it shows.
var docsChecks = []*docsCheck{
	{cmd: `machines migrate Name:drp1.rackn --to region-b --wait`, want: []string{`(?m)^completed$`}},
	{cmd: `bin/temporal workflow start .*--type MigrateMachine`, want: []string{"Running execution"}},
	{cmd: `bin/temporal workflow result`, want: []string{"COMPLETED"}},
	{cmd: `migrations bulk .*--pool batch`, want: []string{fmt.Sprintf(`\b%d/%[1]d migrated, 0 failed`, dev.SeedPools["batch"])}},
	// rack-a holds its seeded machines and the ones that enlisted through it.
	{cmd: `racks transfer rack-a`, verify: rackTransferMovedAll},
	{cmd: `schedule create nightly-gold`, want: []string{"Created schedule nightly-gold"}},
	{cmd: `schedule list`, want: []string{"nightly-gold"}},
	{cmd: `schedule trigger nightly-gold`, want: []string{"nightly-gold"}},
	// The triggered run is asynchronous: the listing is read again until every machine is
	// there and active (Runnable).
	{cmd: `-E \$B machines list Pool=gold`, want: []string{`gold-01 +none +true`, `gold-02 +none +true`, `gold-03 +none +true`, `gold-04 +none +true`}, eventually: true},
	{cmd: `schedule delete nightly-gold`, want: []string{"nightly-gold"}},
	// The rack learns a new domain with its next config poll.
	{cmd: `dig .* node-01\.rack-a\.region-a\.example`, eventually: true},
	// The rack's syslog receiver counts a datagram when it has read it.
	{cmd: `RACK_A/metrics \| grep -E '\^ironflow_syslog`, eventually: true},
}

var rackTransferResult = regexp.MustCompile(`completed \(machines ([0-9]+)/([0-9]+), 0 failed, 0 skipped\)`)

func rackTransferMovedAll(out string) string {
	m := rackTransferResult.FindStringSubmatch(out)
	if m == nil {
		return "no completed transfer with 0 failed and 0 skipped"
	}
	if moved, _ := strconv.Atoi(m[1]); m[1] != m[2] || moved < dev.RackMachines {
		return fmt.Sprintf("the transfer moved %s of %s machines: rack-a holds at least %d", m[1], m[2], dev.RackMachines)
	}
	return ""
}

type docsCheck struct {
	cmd        string              // regexp on the command as the docs write it
	want       []string            // regexps on its output
	verify     func(string) string // what else is wrong with its output, or ""
	eventually bool                // run again until the output is right
}

func (c *docsCheck) complaint(out string) string {
	if c == nil {
		return ""
	}
	for _, w := range c.want {
		if !regexp.MustCompile(w).MatchString(out) {
			return fmt.Sprintf("output lacks %q", w)
		}
	}
	if c.verify != nil {
		return c.verify(out)
	}
	return ""
}

// docsRackURLs are the racks' HTTP boot URLs as the docs show them: the dev stack chooses
// the racks' ports at every start.
var docsRackURLs = map[string]string{"rack-a": "http://127.0.0.1:44473"}

// docsRackProxies are the racks' HTTP proxy addresses as the docs show them (on the kernel
// command line of what a rack boots); the stack chooses them at start too.
var docsRackProxies = map[string]string{"rack-a": "127.0.0.1:44955"}

// docsRackSyslog are the racks' syslog addresses as the docs show them (the discovery
// environment's kernel line names them); chosen at every start too.
var docsRackSyslog = map[string]string{"rack-a": "127.0.0.1:44514"}

type docsRunner struct {
	t     *testing.T
	dir   string
	stack *makeDev
	env   []string
	seen  map[*docsCheck]bool // the checks a command matched
	names *uuidNames
	// toDocs puts the docs' addresses where the stack's show; toActual does the reverse.
	toDocs, toActual *strings.Replacer
}

func newDocsRunner(t *testing.T, clone string, md *makeDev, addrs dev.StackAddresses, tmp string) *docsRunner {
	toDocs, toActual := []string{md.regionA, readmeA, md.regionB, readmeB}, []string{readmeA, md.regionA, readmeB, md.regionB}
	for name, url := range docsRackURLs {
		rk, ok := addrs.Racks[name]
		if !ok {
			t.Fatalf("the stack has no rack %s", name)
		}
		toDocs, toActual = append(toDocs, rk.HTTPURL, url), append(toActual, url, rk.HTTPURL)
		if syslog, ok := docsRackSyslog[name]; ok {
			toDocs, toActual = append(toDocs, rk.Syslog, syslog), append(toActual, syslog, rk.Syslog)
		}
	}
	for name, addr := range docsRackProxies {
		rk := addrs.Racks[name]
		toDocs, toActual = append(toDocs, rk.Proxy, addr), append(toActual, addr, rk.Proxy)
	}
	// The stack's Temporal address replaces the default port the docs leave to the CLIs.
	return &docsRunner{
		t: t, dir: clone, stack: md, env: append(baseEnv(tmp), "TEMPORAL_ADDRESS="+md.temporal),
		seen: map[*docsCheck]bool{}, names: newUUIDNames(),
		toDocs: strings.NewReplacer(toDocs...), toActual: strings.NewReplacer(toActual...),
	}
}

// run runs one docs command and checks its output.
func (r *docsRunner) run(c docsCommand) {
	t := r.t
	t.Helper()
	text := r.names.actual(r.toActual.Replace(c.text))
	if strings.HasPrefix(text, "export ") || strings.HasPrefix(text, "eval ") {
		out, err := r.bash(text + "\nenv -0")
		if err != nil {
			t.Fatalf("%s: %s: %v\n%s", c.where(), c.text, err, out)
		}
		r.env = strings.Split(strings.TrimRight(out, "\x00"), "\x00")
		return
	}
	var check *docsCheck
	for _, ch := range docsChecks {
		if regexp.MustCompile(ch.cmd).MatchString(c.text) {
			check, r.seen[ch] = ch, true
		}
	}
	attempt := func() string {
		out, err := r.bash(text)
		t.Logf("%s: $ %s\n%s", c.where(), c.text, out)
		if err != nil {
			t.Fatalf("%s: %s: %v", c.where(), c.text, err)
		}
		if strings.Contains(out, "0/0 migrated") || strings.Contains(out, "nothing matched the selector") {
			t.Errorf("%s: %s did nothing", c.where(), c.text)
		}
		if c.hasShown {
			if got, want := r.normalize(out), r.normalize(c.shown); !r.names.match(got, want) {
				return fmt.Sprintf("%s: %s printed\n%s\nthe docs show\n%s", c.where(), c.text, got, want)
			}
		}
		if complaint := check.complaint(out); complaint != "" {
			return fmt.Sprintf("%s: %s: %s", c.where(), c.text, complaint)
		}
		return ""
	}
	if check != nil && check.eventually {
		testutil.EventuallyOK(t, 2*time.Minute, attempt)
		return
	}
	if complaint := attempt(); complaint != "" {
		t.Error(complaint)
	}
}

// normalize makes an output comparable with the docs': the docs' ports, no timestamps,
// columns by single spaces (widths follow the longest value), and no phases that `--wait`
// happened to see before the last one.
func (r *docsRunner) normalize(s string) string {
	s = r.toDocs.Replace(s)
	s = passingPhase.ReplaceAllString(s, "")
	s = timestamp.ReplaceAllString(s, "<time>")
	s = columnGap.ReplaceAllString(s, " ")
	return strings.TrimSpace(trailingSpaces.ReplaceAllString(s, ""))
}

func (r *docsRunner) bash(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = r.dir, r.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// baseEnv is the test's environment without Ironflow's and Temporal's variables (the README
// sets what it needs), with tmp as the temp dir.
func baseEnv(tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IRONFLOW_") && !strings.HasPrefix(kv, "TEMPORAL_") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	return append(env, "TMPDIR="+tmp)
}

// makeDev is `make dev` running in a clone.
type makeDev struct {
	cmd              *exec.Cmd
	regionA, regionB string // URLs from the banner
	temporal         string
	mu               sync.Mutex
	output           strings.Builder
	exited           chan struct{}
}

// The docs' region URLs: make dev's default ports.
const readmeA, readmeB = "http://127.0.0.1:5240", "http://127.0.0.1:5241"

var (
	bannerLine     = regexp.MustCompile(`^\s+(region-a API|region-b API|Temporal)\s+(\S+)$`)
	timestamp      = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	columnGap      = regexp.MustCompile(` {2,}`)
	trailingSpaces = regexp.MustCompile(`(?m) +$`)
	passingPhase   = regexp.MustCompile(`(?m)^(` + strings.Join([]string{
		workflows.PhaseValidating, workflows.PhaseWaitingForJob, workflows.PhaseMintingTicket, workflows.PhaseQuiescing,
		workflows.PhaseCopying, workflows.PhaseFinalizing, workflows.PhaseRepointing, workflows.PhaseActivating,
		workflows.PhaseDestroyingStub,
	}, "|") + `)\n`)
)

// startMakeDev runs `make dev` in clone, in a process group of its own (as a terminal runs
// it), and returns when it prints its banner.
func startMakeDev(t *testing.T, clone, tmp string) *makeDev {
	t.Helper()
	md := &makeDev{exited: make(chan struct{})}
	md.cmd = exec.Command("make", "dev")
	md.cmd.Dir = clone
	md.cmd.Env = append(baseEnv(tmp), "IRONFLOW_DEV_FREE_PORTS=1")
	md.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := md.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	md.cmd.Stderr = md.cmd.Stdout
	if err := md.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A test that failed before its Ctrl-C stops the stack the same way, so the dev stack
		// stops the Temporal server and PostgreSQL it started (in process groups of their
		// own, which a SIGKILL of make's group misses); SIGKILL only if that hangs.
		select {
		case <-md.exited:
			return
		default:
		}
		syscall.Kill(-md.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-md.exited:
		case <-time.After(time.Minute):
			syscall.Kill(-md.cmd.Process.Pid, syscall.SIGKILL)
			<-md.exited
		}
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			md.mu.Lock()
			md.output.WriteString(sc.Text() + "\n")
			if m := bannerLine.FindStringSubmatch(sc.Text()); m != nil {
				switch m[1] {
				case "region-a API":
					md.regionA = m[2]
				case "region-b API":
					md.regionB = m[2]
				case "Temporal":
					md.temporal = m[2]
				}
			}
			if strings.Contains(sc.Text(), "Ctrl-C stops everything.") {
				close(ready)
			}
			md.mu.Unlock()
		}
		md.cmd.Wait()
		close(md.exited)
	}()
	select {
	case <-ready:
	case <-md.exited:
		t.Fatalf("make dev exited before it was ready:\n%s", md.log())
	case <-time.After(5 * time.Minute):
		t.Fatalf("make dev not ready after 5 minutes:\n%s", md.log())
	}
	md.mu.Lock()
	defer md.mu.Unlock()
	if md.regionA == "" || md.regionB == "" || md.temporal == "" {
		t.Fatalf("the banner lacks the region or Temporal addresses:\n%s", md.output.String())
	}
	return md
}

func (md *makeDev) log() string {
	md.mu.Lock()
	defer md.mu.Unlock()
	return md.output.String()
}

// interrupt sends SIGINT to make's process group, as Ctrl-C in its terminal does, and waits
// for make to end.
func (md *makeDev) interrupt(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-md.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-md.exited:
	case <-time.After(time.Minute):
		t.Fatalf("make dev still running a minute after Ctrl-C:\n%s", md.log())
	}
	if out := md.log(); !strings.Contains(out, "stopping...") {
		t.Errorf("make dev did not stop the stack:\n%s", out)
	}
}

// waitGone waits for processes that are still exiting.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	testutil.EventuallyOK(t, 30*time.Second, func() string {
		for _, pid := range pids {
			if alive(pid) {
				return fmt.Sprintf("process %d (%s) survived Ctrl-C", pid, cmdline(pid))
			}
		}
		return ""
	})
}

// cloneWorkingTree clones the repository under test (its HEAD plus uncommitted changes to
// tracked files) into a directory of mode 0700, like a clone in root's home.
func cloneWorkingTree(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("find the repository: %v", err)
	}
	home, err := os.MkdirTemp("", "ironflow-readme-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(home, "ironflow")
	src := strings.TrimSpace(string(root))
	if out, err := exec.Command("git", "clone", "-q", src, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	diff, err := exec.Command("git", "-C", src, "diff", "--binary", "HEAD").Output()
	if err != nil {
		t.Fatalf("git diff: %v", err)
	}
	if len(diff) > 0 {
		apply := exec.Command("git", "-C", clone, "apply", "--whitespace=nowarn")
		apply.Stdin = bytes.NewReader(diff)
		if out, err := apply.CombinedOutput(); err != nil {
			t.Fatalf("git apply the working tree's changes: %v\n%s", err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(clone, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	return clone
}

// outsideEntries lists what is in the places a run could write to outside the clone and the
// temp dir: /var/tmp, the home directory and its .config, and the postgres user's home. The
// data dirs that stacks of older versions (elsewhere on this host) keep there are left out.
func outsideEntries(t *testing.T) []string {
	t.Helper()
	dirs := []string{"/var/tmp"}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, home, filepath.Join(home, ".config"))
	}
	if pgUser, err := user.Lookup("postgres"); err == nil {
		dirs = append(dirs, pgUser.HomeDir)
	}
	var out []string
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), "ironflow-dev-") {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}
