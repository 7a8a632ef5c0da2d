package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ironflow/ironflow/workflows"
	"github.com/ironflow/ironflow/workflows/moves"
)

// The table of a bulk run names the failures its result keeps and, when it counts more,
// says how to list them all; a result recorded before the counts were kept lists every
// machine and is counted from its lists.
func TestShowBulkFailures(t *testing.T) {
	failures := []workflows.MachineFailure{{Machine: "m-1", Error: "refused"}, {Machine: "m-2", Error: "gone"}}
	tests := []struct {
		name     string
		result   workflows.BulkMigrateResult
		wantLine string
		wantHint string // on stderr, "" for none
	}{
		{"more failed than named", workflows.BulkMigrateResult{Total: 500, Migrated: 300, FailedCount: 200, Failed: failures},
			"300/500 migrated, 200 failed, 0 skipped", "200 machines failed; the first 2 are named here, `ironflow migrations failures bulk-migrate/n` lists them all\n"},
		{"recorded before counts", workflows.BulkMigrateResult{Total: 3, Succeeded: []string{"m-3"}, Failed: failures},
			"1/3 migrated, 2 failed, 0 skipped", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &cobra.Command{}
			cmd.Flags().String(flagOutput, string(formatTable), "")
			var out, errOut bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			d := bulkDetail{Run: moves.Run{WorkflowID: "bulk-migrate/n"}, Result: &tt.result}
			if err := render(cmd, d, []bulkDetail{d}, bulkDetailColumns); err != nil {
				t.Fatal(err)
			}
			if err := showBulkFailures(cmd, d); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.wantLine) || !strings.Contains(out.String(), "m-1           failed  refused") || !strings.Contains(out.String(), "m-2           failed  gone") {
				t.Errorf("stdout %q, want %q and a row per failure", out.String(), tt.wantLine)
			}
			if errOut.String() != tt.wantHint {
				t.Errorf("stderr %q, want %q", errOut.String(), tt.wantHint)
			}
		})
	}
}
