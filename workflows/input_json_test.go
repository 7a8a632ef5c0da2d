package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/activities/regiontest"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/workers"
	"github.com/ironflow/ironflow/workflows"
)

func TestInputsAcceptDurationStrings(t *testing.T) {
	var m workflows.MigrateMachineInput
	if err := json.Unmarshal([]byte(`{"SourceRegion":"east","WaitForRunningJob":"10m","AgentCheckInTimeout":5000000000}`), &m); err != nil {
		t.Fatal(err)
	}
	if m.SourceRegion != "east" || m.WaitForRunningJob != 10*time.Minute || m.AgentCheckInTimeout != 5*time.Second {
		t.Errorf("decoded %+v", m)
	}
	var b workflows.BulkMigrateInput
	if err := json.Unmarshal([]byte(`{"sourceregion":"east","Selector":{"Pool":"gold"},"WaitForRunningJob":"1h30m"}`), &b); err != nil {
		t.Fatal(err)
	}
	if b.SourceRegion != "east" || b.Selector.Pool != "gold" || b.WaitForRunningJob != 90*time.Minute {
		t.Errorf("decoded %+v", b)
	}
	var tr workflows.TransferRackInput
	if err := json.Unmarshal([]byte(`{"Rack":"r","WaitForRunningJob":"90s"}`), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Rack != "r" || tr.WaitForRunningJob != 90*time.Second {
		t.Errorf("decoded %+v", tr)
	}
	// Encoding is unchanged, so recorded histories and schedules still decode.
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"WaitForRunningJob":600000000000`) {
		t.Errorf("encoded %s", data)
	}
	var again workflows.MigrateMachineInput
	if err := json.Unmarshal(data, &again); err != nil || again.WaitForRunningJob != m.WaitForRunningJob {
		t.Errorf("round trip: %+v, %v", again, err)
	}
}

func TestInputsRefuseUnknownFieldsAndBadValues(t *testing.T) {
	tests := []struct {
		name  string
		input string
		into  any
		want  string
	}{
		{"misspelt field", `{"Source":"east","TargetRegion":"west"}`, &workflows.MigrateMachineInput{},
			`MigrateMachineInput has no field "Source" (did you mean SourceRegion?); its fields are SourceRegion, TargetRegion, Machine`},
		{"unknown field", `{"Colour":"red"}`, &workflows.TransferRackInput{},
			`TransferRackInput has no field "Colour"; its fields are SourceRegion, TargetRegion, Rack, Window, WaitForRunningJob`},
		{"bulk field", `{"Pool":"gold"}`, &workflows.BulkMigrateInput{}, `BulkMigrateInput has no field "Pool"`},
		{"nested unknown field", `{"Selector":{"Pools":"gold"}}`, &workflows.BulkMigrateInput{}, `unknown field "Pools"`},
		{"bad duration", `{"WaitForRunningJob":"ten minutes"}`, &workflows.MigrateMachineInput{},
			`MigrateMachineInput.WaitForRunningJob: "ten minutes" is not a duration`},
		{"not an object", `["east"]`, &workflows.MigrateMachineInput{}, "MigrateMachineInput: want a JSON object"},
		{"wrong type", `{"Window":"3"}`, &workflows.TransferRackInput{}, "TransferRackInput: json: cannot unmarshal string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := json.Unmarshal([]byte(tt.input), tt.into)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestWorkflowFailsOnAnUnknownInputField starts MigrateMachine in the test environment with
// input JSON as a user types it: the run fails at once with the field named, and no activity
// runs.
func TestWorkflowFailsOnAnUnknownInputField(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.MigrateMachine)
	env.RegisterActivity(&activities.Activities{Regions: onlyNorth(t)})
	ran := 0
	env.SetOnActivityStartedListener(func(_ *activity.Info, _ context.Context, _ converter.EncodedValues) { ran++ })
	env.ExecuteWorkflow("MigrateMachine", json.RawMessage(`{"Source":"east","TargetRegion":"west","Machine":"Name:birdy"}`))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), `MigrateMachineInput has no field "Source" (did you mean SourceRegion?)`) {
		t.Errorf("workflow error %v", err)
	}
	if ran != 0 {
		t.Errorf("%d activities ran on a bad input", ran)
	}
}

// TestTemporalCLIStartWithAnUnknownFieldFails starts the workflow the way the README does, with
// `temporal workflow start --input`, on a real dev server and worker: the run fails (not
// retried, not stuck) with the field named; a Go duration string is accepted.
func TestTemporalCLIStartWithAnUnknownFieldFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := temporalserver.Start(ctx, temporalserver.Options{Headless: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := workers.RegisterSearchAttributes(ctx, c, "default"); err != nil {
		t.Fatal(err)
	}
	w := worker.New(c, workflows.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflows.MigrateMachine)
	w.RegisterActivity(&activities.Activities{Regions: onlyNorth(t)})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	bin, err := temporalserver.FindCLI()
	if err != nil {
		t.Fatal(err)
	}
	start := func(id, input string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, "workflow", "start", "--address", srv.Address,
			"--task-queue", workflows.TaskQueue, "--type", "MigrateMachine", "--workflow-id", id, "--input", input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil {
			t.Fatalf("temporal workflow start: %v\n%s%s", err, out, stderr.String())
		}
	}
	start("misspelt", `{"Source":"east","TargetRegion":"west","Machine":"Name:birdy"}`)
	err = c.GetWorkflow(ctx, "misspelt", "").Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), `MigrateMachineInput has no field "Source" (did you mean SourceRegion?)`) {
		t.Errorf("run error %v", err)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, "misspelt", "")
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		t.Errorf("status %s, want failed", st)
	}

	// A duration string decodes; the run then fails on what it checks next (no such region),
	// not on its input.
	start("duration", `{"SourceRegion":"east","TargetRegion":"west","Machine":"Name:birdy","WaitForRunningJob":"10m"}`)
	err = c.GetWorkflow(ctx, "duration", "").Get(ctx, nil)
	if err == nil || strings.Contains(err.Error(), "decode") || !strings.Contains(err.Error(), `region "east" is not in this worker's regions file`) {
		t.Errorf("run error %v", err)
	}
	var appErr interface{ Message() string }
	if !errors.As(err, &appErr) {
		t.Errorf("run error %T is not an application error", err)
	}
}

// onlyNorth is a regions file with one region, north, that the tests' inputs do not name.
func onlyNorth(t *testing.T) *activities.Regions {
	return regiontest.Resolver(t, regiontest.New("north", "https://north.example:5240", &regiontest.Journal{}))
}
