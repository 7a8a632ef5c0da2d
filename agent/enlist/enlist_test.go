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
		Script: `i=0; while [ $i -lt 3000 ]; do printf 'é\000%04d\n' $i; i=$((i+1)); done; exit 4`})
	if res.ExitCode != 4 || !res.Truncated || len(res.Output) > api.MaxCommissionOutput ||
		!utf8.ValidString(res.Output) || strings.ContainsRune(res.Output, 0) || !strings.HasSuffix(res.Output, "é2999\n") {
		t.Fatalf("result: exit %d, truncated %v, %d bytes, ends %q", res.ExitCode, res.Truncated, len(res.Output), res.Output[max(0, len(res.Output)-20):])
	}
	slow := runScript(context.Background(), api.CommissioningScript{Name: "slow", Script: "echo started; sleep 30", TimeoutSeconds: 1})
	if slow.ExitCode == 0 || !strings.HasPrefix(slow.Output, "started\n") || !strings.Contains(slow.Output, "timed out after 1s") {
		t.Fatalf("slow script: %+v", slow)
	}
}

func TestCmdlineURL(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("console=ttyS0 ironflow.url=http://10.0.0.2:5248 quiet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := CmdlineURL(root); got != "http://10.0.0.2:5248" {
		t.Fatalf("CmdlineURL = %q", got)
	}
	if got := CmdlineURL(t.TempDir()); got != "" {
		t.Fatalf("CmdlineURL without /proc/cmdline = %q", got)
	}
}
