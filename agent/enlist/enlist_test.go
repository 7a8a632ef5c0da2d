package enlist

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ironflow/ironflow/region/api"
)

// A script's output is cut to its tail, valid UTF-8 without NUL bytes; a script that runs
// too long is stopped and says so.
func TestRunScriptKeepsABoundedTail(t *testing.T) {
	res := runScript(context.Background(), api.CommissioningScript{Name: "chatty",
		Script: `i=0; while [ $i -lt 3000 ]; do printf 'é\000%04d\n' $i; i=$((i+1)); done; exit 4`}, nil)
	if res.ExitCode != 4 || !res.Truncated || len(res.Output) > api.MaxCommissionOutput ||
		!utf8.ValidString(res.Output) || strings.ContainsRune(res.Output, 0) || !strings.HasSuffix(res.Output, "é2999\n") {
		t.Fatalf("result: exit %d, truncated %v, %d bytes, ends %q", res.ExitCode, res.Truncated, len(res.Output), res.Output[max(0, len(res.Output)-20):])
	}
	slow := runScript(context.Background(), api.CommissioningScript{Name: "slow", Script: "echo started; sleep 30", TimeoutSeconds: 1}, nil)
	if slow.ExitCode == 0 || !strings.HasPrefix(slow.Output, "started\n") || !strings.Contains(slow.Output, "timed out after 1s") {
		t.Fatalf("slow script: %+v", slow)
	}
}

func TestCmdlineURL(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("console=ttyS0 ironflow.url=http://10.0.0.2:5248 ironflow.proxy=http://10.0.0.2:8000 quiet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := CmdlineURL(root); got != "http://10.0.0.2:5248" {
		t.Fatalf("CmdlineURL = %q", got)
	}
	if got := CmdlineProxy(root); got != "http://10.0.0.2:8000" {
		t.Fatalf("CmdlineProxy = %q", got)
	}
	if got := CmdlineURL(t.TempDir()); got != "" {
		t.Fatalf("CmdlineURL without /proc/cmdline = %q", got)
	}
}

// TestScriptsGetTheRackProxy: with the rack's proxy on the kernel command line, the
// commissioning scripts fetch through it (http_proxy, https_proxy), but not from the rack.
func TestScriptsGetTheRackProxy(t *testing.T) {
	res := runScript(context.Background(), api.CommissioningScript{Name: "env", Script: `echo "$http_proxy $https_proxy $HTTP_PROXY $no_proxy"`}, proxyEnv("http://10.0.0.2:8000"))
	if want := "http://10.0.0.2:8000 http://10.0.0.2:8000 http://10.0.0.2:8000 10.0.0.2\n"; res.Output != want {
		t.Fatalf("the script's proxy environment: %q, want %q", res.Output, want)
	}
	if env := proxyEnv(""); env != nil {
		t.Fatalf("no proxy: %q", env)
	}
}
