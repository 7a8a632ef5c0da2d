package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/spf13/cobra/doc"
)

// cliReferenceDir is the generated CLI reference, relative to this package.
const cliReferenceDir = "../../docs/cli"

// envUpdateCLIReference makes TestCLIReferenceIsCurrent write the reference instead of
// comparing it (`make docs`).
const envUpdateCLIReference = "IRONFLOW_UPDATE_CLI_REFERENCE"

// TestCLIReferenceIsCurrent generates the markdown reference of every command from the cobra
// tree and fails when docs/cli differs from it, so the reference cannot drift from the flags.
func TestCLIReferenceIsCurrent(t *testing.T) {
	dir := t.TempDir()
	if os.Getenv(envUpdateCLIReference) != "" {
		dir = cliReferenceDir
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := newRootCommand()
	root.DisableAutoGenTag = true // no date: the output is the same on every run
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		t.Fatal(err)
	}
	if dir == cliReferenceDir {
		return
	}
	out, err := exec.Command("diff", "-ru", cliReferenceDir, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("docs/cli is not what the commands generate: run `make docs`\n%s", out)
	}
}
