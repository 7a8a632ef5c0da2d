package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/ironflow/ironflow/dev"
	"github.com/ironflow/ironflow/dev/seeddata"
	"github.com/ironflow/ironflow/internal/testutil"
	"github.com/ironflow/ironflow/workflows"
)

// TestDemo drives dev.Stack the way `make demo` does, with the web UI on, and checks that
// Temporal lists the demo's migrations with their search attributes, which is what the web UI
// shows and filters on.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stack, err := dev.StartStack(ctx, dev.StackOptions{Seed: true, RunWorker: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Stop)

	var out bytes.Buffer
	demo := &dev.Demo{Stack: stack, Binary: buildIronflow(t), Out: &out}
	if err := demo.Run(ctx); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"Machine Name:birdy migrated to " + stack.Regions["region-b"].URL, "=== summary", "machine drp1.rackn"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}

	resp, err := http.Get(stack.Temporal.UIURL)
	if err != nil {
		t.Fatalf("Temporal web UI: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("Temporal web UI answered %d", resp.StatusCode)
	}

	// The web UI's saved view "MigrationPhase = completed AND TargetRegion = region-b".
	query := "WorkflowType = 'MigrateMachine' AND MigrationPhase = 'completed' AND TargetRegion = 'region-b' AND SourceRegion = 'region-a'"
	want := []string{workflows.MigrateMachineID(seeddata.BirdyUUID), workflows.MigrateMachineID("5f0e43a9-3d2b-4a55-9a8e-1c6a8f0c0a01")}
	// Visibility is eventually consistent: the listing catches up with the demo's moves.
	executions := testutil.EventuallyValue(t, time.Minute, func() ([]*workflowpb.WorkflowExecutionInfo, string) {
		list, err := stack.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return nil, fmt.Sprintf("list %s: %v", query, err)
		}
		seen := map[string]bool{}
		for _, e := range list.GetExecutions() {
			seen[e.GetExecution().GetWorkflowId()] = true
		}
		for _, id := range want {
			if !seen[id] {
				return nil, fmt.Sprintf("Temporal does not list %s with the demo's search attributes (saw %v)", id, seen)
			}
		}
		return list.GetExecutions(), ""
	})
	for _, e := range executions {
		fields := e.GetSearchAttributes().GetIndexedFields()
		for _, key := range workflows.SearchAttributes() {
			if _, ok := fields[key.GetName()]; !ok && key.GetName() != "RackUuid" && key.GetName() != "MachineUuids" { // a machine's own migration: no rack, no batch
				t.Errorf("%s has no search attribute %s", e.GetExecution().GetWorkflowId(), key.GetName())
			}
		}
	}
}
