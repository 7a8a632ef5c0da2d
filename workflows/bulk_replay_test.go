package workflows_test

import (
	"testing"

	"github.com/ironflow/ironflow/workflows"
)

// TestReplayBulkMigrateHistories replays the BulkMigrate histories recorded on a real server
// (go test ./workflows -run BulkMigrateOnDevServer -record) against the current code.
func TestReplayBulkMigrateHistories(t *testing.T) {
	replayDir(t, bulkHistoryDir, 1, "go test ./workflows -run BulkMigrateOnDevServer -record", workflows.BulkMigrate)
}
