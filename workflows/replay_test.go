package workflows_test

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/internal/payloadcodec"
	"github.com/ironflow/ironflow/workflows"
)

// TestReplayRecordedHistories replays the MigrateMachine histories recorded on a real server
// against the current workflow code: a change that would break runs in flight fails here and
// needs workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	replayDir(t, "testdata", 2, "go test ./workflows -run OnDevServer -record", workflows.MigrateMachine)
}

// replayDir replays every history recorded in dir (at least atLeast; record tells how to
// record them) against the current code of wfs, each under the workflow ID it ran as: the
// workflows check their own ID, which the replayer would otherwise make "ReplayId".
func replayDir(t *testing.T, dir string, atLeast int, record string, wfs ...any) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < atLeast {
		t.Fatalf("want at least %d recorded histories in %s (%s), found %v", atLeast, dir, record, paths)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h, err := client.HistoryFromJSON(mustOpen(t, path), client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Histories recorded in clear replay on a worker that encrypts its payloads: its
			// codec passes payloads it did not seal through.
			for _, dc := range []converter.DataConverter{converter.GetDefaultDataConverter(), replayCodec(t).DataConverter()} {
				r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: dc})
				if err != nil {
					t.Fatal(err)
				}
				for _, wf := range wfs {
					r.RegisterWorkflow(wf)
				}
				id := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
				opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}}
				if err := r.ReplayWorkflowHistoryWithOptions(nil, h, opts); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// replayCodec is a payload codec with one key, as a worker with --payload-keys has.
func replayCodec(t *testing.T) *payloadcodec.Codec {
	t.Helper()
	c, err := payloadcodec.Parse(strings.NewReader("replay:" + base64.StdEncoding.EncodeToString(make([]byte, payloadcodec.KeySize))))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
