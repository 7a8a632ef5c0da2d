package workflows_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/ironflow/ironflow/workflows"
)

// TestReplayRecordedHistories replays histories recorded on a real server (go test
// ./workflows -run OnDevServer -record) against the current workflow code: a change that
// would break runs in flight fails here and needs workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 {
		t.Fatalf("want the recorded histories in testdata/, found %v", paths)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.MigrateMachine)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, path); err != nil {
				t.Fatal(err)
			}
		})
	}
}
