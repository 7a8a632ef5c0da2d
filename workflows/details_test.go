package workflows_test

import (
	"testing"
	"time"

	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/ironflow/ironflow/workflows"
)

// metadata is the workflow's answer to Temporal's metadata query, what the UI shows.
func (b *bulkEnv) metadata() *sdkpb.WorkflowMetadata {
	b.t.Helper()
	v, err := b.env.QueryWorkflow("__temporal_workflow_metadata") // the SDK exports no name for it
	if err != nil {
		b.t.Fatalf("metadata query: %v", err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		b.t.Fatal(err)
	}
	return &md
}

// A running bulk migration tells the Temporal UI its counts as current details, and what its
// progress query and control Updates do.
func TestBulkMigrateDescribesItselfToTheUI(t *testing.T) {
	b := newBulkEnv(t, machineUUIDs(3), &fakeChildren{duration: tenMinutes})
	audits(b.env)
	control(b.env, time.Minute, workflows.PauseUpdate, workflows.ControlRequest{By: "alice"})
	var running, paused *sdkpb.WorkflowMetadata
	b.env.RegisterDelayedCallback(func() { running = b.metadata() }, 30*time.Second)
	b.env.RegisterDelayedCallback(func() { paused = b.metadata() }, 2*time.Minute)
	control(b.env, 3*time.Minute, workflows.ResumeUpdate, workflows.ControlRequest{By: "alice"})
	if _, err := b.run(bulkInput(1)); err != nil {
		t.Fatal(err)
	}
	if got, want := running.GetCurrentDetails(), "0 of 3 machines migrated, 0 failed, 0 skipped, 1 running."; got != want {
		t.Errorf("current details %q, want %q", got, want)
	}
	if got, want := paused.GetCurrentDetails(), "0 of 3 machines migrated, 0 failed, 0 skipped, 1 running. Paused by an operator."; got != want {
		t.Errorf("current details while paused %q, want %q", got, want)
	}
	described := map[string]string{}
	for _, d := range append(running.GetDefinition().GetQueryDefinitions(), running.GetDefinition().GetUpdateDefinitions()...) {
		described[d.GetName()] = d.GetDescription()
	}
	for _, name := range []string{workflows.ProgressQuery, workflows.PauseUpdate, workflows.ResumeUpdate, workflows.SetWindowUpdate} {
		if described[name] == "" {
			t.Errorf("%s has no description: %v", name, described)
		}
	}
}
