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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/workflows"
)

// TestReadmeFromAFreshClone does what the README tells a new user, in the order written: it
// clones the working tree into a private (0700) directory, as a clone in root's home, runs
// `make dev` there with the default state dir (on free ports, IRONFLOW_DEV_FREE_PORTS=1), and
// runs every ```sh and ```console block of the clone's README through bash, the real CLI and
// the real Temporal CLI. A console block's output must be what the README shows (timestamps
// and ports aside); the other commands must exit 0, and the ones that move machines must
// move some (readmeChecks). Then it interrupts make like Ctrl-C does and checks nothing is left
// running and nothing was written outside the clone, PostgreSQL's data included.
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

	blocks := readmeBlocks(t, filepath.Join(clone, "README.md"))
	// The stack's Temporal address replaces the default port the README leaves to the CLIs.
	r := &readmeRunner{t: t, dir: clone, stack: md, env: append(baseEnv(tmp), "TEMPORAL_ADDRESS="+md.temporal), seen: map[*readmeCheck]bool{}}
	for _, b := range blocks {
		for _, c := range b.commands {
			r.run(c)
		}
	}
	for _, c := range readmeChecks {
		if !r.seen[c] {
			t.Errorf("no README command matches %q: the README lost that example", c.cmd)
		}
	}

	md.interrupt(t)
	waitGone(t, started)
	if left := stackProcesses(t, -1, clone); len(left) > 0 {
		t.Errorf("processes still running after Ctrl-C: %v", left)
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

// readmeChecks are what the README's commands that move machines must print: real work.
var readmeChecks = []*readmeCheck{
	{cmd: `bin/temporal workflow start .*--type MigrateMachine`, want: []string{"Running execution"}},
	{cmd: `bin/temporal workflow result`, want: []string{"COMPLETED"}},
	{cmd: `migrations bulk .*--pool batch`, want: []string{fmt.Sprintf(`\b%d/%[1]d migrated, 0 failed`, dev.SeedPools["batch"])}},
	{cmd: `racks transfer rack-a`, want: []string{fmt.Sprintf(`completed \(machines %d/%[1]d, 0 failed, 0 skipped\)`, dev.RackMachines)}},
	{cmd: `schedule create nightly-gold`, want: []string{"Created schedule nightly-gold"}},
	{cmd: `schedule list`, want: []string{"nightly-gold"}},
	{cmd: `schedule trigger nightly-gold`, want: []string{"nightly-gold"}},
	// The triggered run is asynchronous: the listing is read again until every machine is
	// there and active (Runnable).
	{cmd: `-E \$B machines list Pool=gold`, want: []string{`gold-01 +none +true`, `gold-02 +none +true`, `gold-03 +none +true`, `gold-04 +none +true`}, eventually: true},
	{cmd: `schedule delete nightly-gold`, want: []string{"nightly-gold"}},
}

type readmeCheck struct {
	cmd        string   // regexp on the command as the README writes it
	want       []string // regexps on its output
	eventually bool
}

// readmeCommand is one command of the README and, in a console block, the output it shows.
type readmeCommand struct {
	line     int
	text     string
	shown    string
	hasShown bool
}

type readmeBlock struct{ commands []readmeCommand }

// readmeBlocks reads the ```sh and ```console blocks of a README, but those after a
// `<!-- readme-test: skip (why) -->` line.
func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	lines := strings.Split(string(b), "\n")
	skip := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "<!-- readme-test: skip") {
			skip = true
			continue
		}
		if !strings.HasPrefix(line, "```") {
			continue
		}
		lang := strings.TrimPrefix(line, "```")
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		if (lang == "sh" || lang == "console") && !skip {
			blocks = append(blocks, parseBlock(lang == "console", lines[i+1:end], i+2))
		}
		skip = false
		i = end
	}
	if len(blocks) == 0 {
		t.Fatal("no command blocks in the README")
	}
	return blocks
}

func parseBlock(console bool, lines []string, firstLine int) readmeBlock {
	var b readmeBlock
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if console && !strings.HasPrefix(line, "$ ") {
			if n := len(b.commands); n > 0 {
				b.commands[n-1].shown += line + "\n"
			}
			continue
		}
		if !console && (strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		c := readmeCommand{line: firstLine + i, text: strings.TrimPrefix(line, "$ "), hasShown: console}
		for strings.HasSuffix(c.text, `\`) && i+1 < len(lines) {
			i++
			c.text += "\n" + lines[i]
		}
		b.commands = append(b.commands, c)
	}
	return b
}

type readmeRunner struct {
	t     *testing.T
	dir   string
	stack *makeDev
	env   []string
	seen  map[*readmeCheck]bool // the checks a command matched
}

// run runs one README command and checks its output.
func (r *readmeRunner) run(c readmeCommand) {
	t := r.t
	t.Helper()
	text := r.stack.toActual(c.text)
	if strings.HasPrefix(text, "export ") {
		out, err := r.bash(text + "\nenv -0")
		if err != nil {
			t.Fatalf("README line %d: %s: %v\n%s", c.line, c.text, err, out)
		}
		r.env = strings.Split(strings.TrimRight(out, "\x00"), "\x00")
		return
	}
	var check *readmeCheck
	for _, ch := range readmeChecks {
		if regexp.MustCompile(ch.cmd).MatchString(c.text) {
			check, r.seen[ch] = ch, true
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := r.bash(text)
		t.Logf("README line %d: $ %s\n%s", c.line, c.text, out)
		if err != nil {
			t.Fatalf("README line %d: %s: %v", c.line, c.text, err)
		}
		if strings.Contains(out, "0/0 migrated") || strings.Contains(out, "nothing matched the selector") {
			t.Errorf("README line %d: %s did nothing", c.line, c.text)
		}
		if c.hasShown {
			if got, want := r.stack.normalize(out), r.stack.normalize(c.shown); got != want {
				t.Errorf("README line %d: %s printed\n%s\nthe README shows\n%s", c.line, c.text, got, want)
			}
		}
		missing := check.missing(out)
		if missing == "" {
			return
		}
		if !check.eventually || time.Now().After(deadline) {
			t.Fatalf("README line %d: %s: output lacks %q", c.line, c.text, missing)
		}
		time.Sleep(time.Second)
	}
}

func (c *readmeCheck) missing(out string) string {
	if c == nil {
		return ""
	}
	for _, w := range c.want {
		if !regexp.MustCompile(w).MatchString(out) {
			return w
		}
	}
	return ""
}

func (r *readmeRunner) bash(script string) (string, error) {
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

// The README's region URLs: make dev's default ports.
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

// toActual puts the stack's free ports where the README writes the default ones.
func (md *makeDev) toActual(s string) string {
	return strings.NewReplacer(readmeA, md.regionA, readmeB, md.regionB).Replace(s)
}

// normalize makes an output comparable with the README's: the README's ports, no
// timestamps, columns by single spaces (widths follow the longest value), and no phases that
// `--wait` happened to see before the last one.
func (md *makeDev) normalize(s string) string {
	s = strings.NewReplacer(md.regionA, readmeA, md.regionB, readmeB).Replace(s)
	s = passingPhase.ReplaceAllString(s, "")
	s = timestamp.ReplaceAllString(s, "<time>")
	s = columnGap.ReplaceAllString(s, " ")
	return strings.TrimSpace(trailingSpaces.ReplaceAllString(s, ""))
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
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d (%s) survived Ctrl-C", pid, cmdline(pid))
		}
	}
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
