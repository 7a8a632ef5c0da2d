// Package enlist is `ironflow agent enlist`, the agent's mode in the discovery environment:
// gather the running system's inventory, run the region's commissioning scripts, and upload
// both so the region records them on the machine (matched by its MACs, SMBIOS identity or
// BMC address, or created New). It talks to its rack (no credential: the rack forwards with
// its own) or to a region with a token.
package enlist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ironflow/ironflow/agent/inventory"
	"github.com/ironflow/ironflow/internal/backoff"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/client"
)

// DefaultScriptTimeout is how long a commissioning script without a TimeoutSeconds may run.
const DefaultScriptTimeout = 10 * time.Minute

// Options configure an enlistment.
type Options struct {
	URL       string // the rack's HTTP boot URL or a region's
	Token     string // a region token; "" through a rack
	Inventory inventory.Options
	// Proxy is the HTTP proxy the commissioning scripts use (http_proxy, https_proxy); ""
	// leaves their environment as it is.
	Proxy      string
	HTTPClient *http.Client // default one with a 30 s timeout
	Logger     *slog.Logger
	Backoff    backoff.Backoff // between attempts while no region answers; default 1s .. 30s
}

// Run enlists the running system and returns what the region did. A refusal (a permanent
// *client.APIError, such as identities two machines claim) ends it at once; unreachable
// endpoints, 5xx, 408 and 429 answers are retried until ctx ends.
func Run(ctx context.Context, o Options) (api.EnlistResult, error) {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Backoff.Initial <= 0 {
		o.Backoff = backoff.Backoff{Initial: time.Second, Max: 30 * time.Second, Jitter: true}
	}
	o.URL = strings.TrimRight(o.URL, "/")
	inv, err := inventory.Gather(ctx, o.Inventory)
	if err != nil {
		return api.EnlistResult{}, err
	}
	o.Logger.Info("inventory gathered", "interfaces", len(inv.Interfaces), "disks", len(inv.Disks), "memory_mib", inv.MemoryMiB, "bmc", inv.BMCAddress)
	region := client.New(o.URL, o.Token, client.WithHTTPClient(o.HTTPClient))
	var scripts []api.CommissioningScript
	if err := retry(ctx, o, func() error {
		var err error
		scripts, err = region.CommissioningScripts().List(ctx, url.Values{"limit": {strconv.Itoa(api.MaxCommissioning)}})
		return err
	}); err != nil {
		return api.EnlistResult{}, fmt.Errorf("commissioning scripts: %w", err)
	}
	report := api.Enlistment{Inventory: &inv, Commissioning: make([]api.CommissioningResult, 0, len(scripts))}
	for _, s := range scripts {
		res := runScript(ctx, s, proxyEnv(o.Proxy))
		o.Logger.Info("commissioning script ran", "script", s.Name, "exit", res.ExitCode, "truncated", res.Truncated)
		report.Commissioning = append(report.Commissioning, res)
	}
	var res api.EnlistResult
	err = retry(ctx, o, func() error {
		var err error
		res, err = region.Enlist(ctx, report)
		return err
	})
	return res, err
}

// retry runs fn until it succeeds, is refused (client.APIError.Permanent), or ctx ends.
func retry(ctx context.Context, o Options, fn func() error) error {
	wait := o.Backoff
	for {
		err := fn()
		if refusal, ok := errors.AsType[*client.APIError](err); err == nil || ok && refusal.Permanent() {
			return err
		}
		o.Logger.Warn("enlistment endpoint unavailable; retrying", "url", o.URL, "error", err)
		if backoff.Sleep(ctx, wait.Next()) != nil {
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		}
	}
}

// runScript runs one commissioning script with /bin/sh -c, env added to the agent's
// environment, and keeps the tail of its output.
func runScript(ctx context.Context, s api.CommissioningScript, env []string) api.CommissioningResult {
	timeout := DefaultScriptTimeout
	if s.TimeoutSeconds > 0 {
		timeout = time.Duration(s.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &tail{max: api.MaxCommissionOutput}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.Script)
	cmd.Stdout, cmd.Stderr = out, out
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// A timeout ends the script's children too (its own process group), and one that still
	// holds the output open cannot keep the run going past WaitDelay.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := api.CommissioningResult{Script: s.Name, ExitCode: -1}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil && res.ExitCode <= 0 {
		res.ExitCode = -1
		out.Write([]byte("\nironflow: " + err.Error() + "\n"))
	}
	if ctx.Err() != nil {
		out.Write([]byte(fmt.Sprintf("\nironflow: timed out after %s\n", timeout)))
	}
	res.Output, res.Truncated = out.text()
	return res
}

// tail keeps the last max bytes written to it.
type tail struct {
	max     int
	buf     []byte
	dropped bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.dropped = true
	}
	return len(p), nil
}

// text is the kept output as the region accepts it: valid UTF-8 without NUL bytes, the
// first rune possibly cut by the tail dropped.
func (t *tail) text() (string, bool) {
	b := t.buf
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), ""), "\x00", ""), t.dropped
}

// CmdlineURL returns the rack URL the discovery environment's kernel command line names
// (api.KernelParamURL, set by the rack's enlistment script), "" when it names none.
func CmdlineURL(root string) string { return cmdlineParam(root, api.KernelParamURL) }

// CmdlineProxy returns the rack's HTTP proxy the kernel command line names
// (api.KernelParamProxy), "" when it names none.
func CmdlineProxy(root string) string { return cmdlineParam(root, api.KernelParamProxy) }

func cmdlineParam(root, name string) string {
	b, err := os.ReadFile(root + "/proc/cmdline")
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}

// proxyEnv is the environment that sends a script's HTTP through proxy, but not what it
// asks of the rack itself (whose proxy refuses the rack's own addresses).
func proxyEnv(proxy string) []string {
	if proxy == "" {
		return nil
	}
	env := []string{"http_proxy=" + proxy, "https_proxy=" + proxy, "HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy}
	if u, err := url.Parse(proxy); err == nil && u.Hostname() != "" {
		env = append(env, "no_proxy="+u.Hostname(), "NO_PROXY="+u.Hostname())
	}
	return env
}
