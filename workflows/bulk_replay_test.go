package workflows_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/ironflow/ironflow/workflows"
)

// TestReplayBulkMigrateHistories replays the BulkMigrate histories recorded on a real server
// (go test ./workflows -run BulkMigrateOnDevServer -record) against the current code.
func TestReplayBulkMigrateHistories(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(bulkHistoryDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("want the recorded histories in %s, found none", bulkHistoryDir)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.BulkMigrate)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, path); err != nil {
				t.Fatal(err)
			}
		})
	}
}
