package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestDeleteStubFlag: the commands that migrate machines keep the source's locked stubs unless
// --delete-stub; the old inverse --skip-machine-destroy still works, hidden, with a warning.
func TestDeleteStubFlag(t *testing.T) {
	commands := map[string]func() *cobra.Command{
		"machines migrate":           newMigrateCommand,
		"migrations bulk":            newMigrationsBulkCommand,
		"migrations schedule create": newScheduleCreateCommand,
	}
	cases := []struct {
		args       []string
		deleteStub string
	}{
		{nil, "false"},
		{[]string{"--delete-stub"}, "true"},
		{[]string{"--skip-machine-destroy=false"}, "true"},
		{[]string{"--skip-machine-destroy"}, "false"},
		{[]string{"--skip-machine-destroy=true"}, "false"},
	}
	for name, newCommand := range commands {
		for _, tc := range cases {
			c := newCommand()
			var warnings strings.Builder
			c.SetErr(&warnings)
			if err := c.ParseFlags(tc.args); err != nil {
				t.Fatalf("%s %v: %v", name, tc.args, err)
			}
			if got := c.Flags().Lookup("delete-stub").Value.String(); got != tc.deleteStub {
				t.Errorf("%s %v: --delete-stub is %s, want %s", name, tc.args, got, tc.deleteStub)
			}
			if deprecated := strings.Contains(strings.Join(tc.args, " "), "skip-machine-destroy"); deprecated != strings.Contains(warnings.String(), "deprecated") {
				t.Errorf("%s %v: warnings %q", name, tc.args, warnings.String())
			}
		}
		code, out, _ := ironflow(t, "", append(strings.Fields(name), "--help")...)
		if code != 0 || !strings.Contains(out, "--delete-stub") || strings.Contains(out, "skip-machine-destroy") {
			t.Errorf("%s --help: exit %d, want --delete-stub and not the deprecated flag:\n%s", name, code, out)
		}
	}
	_, stdout, stderr := ironflow(t, "", "machines", "migrate", "--skip-machine-destroy=false")
	if !strings.Contains(stderr, "--skip-machine-destroy is deprecated: use --delete-stub") || strings.Contains(stdout, "deprecated") {
		t.Errorf("the deprecated flag warns with stdout %q, stderr %q; want the warning on stderr only", stdout, stderr)
	}
}

// parseWithEnv parses args into cmd's flags and applies their variables, as a run does.
func parseWithEnv(cmd *cobra.Command, args []string) error {
	if err := cmd.ParseFlags(args); err != nil {
		return err
	}
	return applyEnv(cmd)
}

// unsetFlagEnv unsets every variable of cmd's flags for the test.
func unsetFlagEnv(t *testing.T, cmd *cobra.Command) {
	t.Helper()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		for _, env := range append(f.Annotations[annotationEnv], f.Annotations[annotationFormerEnv]...) {
			t.Setenv(env, "")
			os.Unsetenv(env)
		}
	})
}
